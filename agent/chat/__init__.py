"""The free-text chat agent: pydantic-ai with the typed `ChatDeps`, its instructions, tools and model chain."""

from agent.chat.agent import ChatAgent
from agent.chat.deps import ChatDeps

__all__ = ["ChatAgent", "ChatDeps"]
