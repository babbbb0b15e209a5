"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""
