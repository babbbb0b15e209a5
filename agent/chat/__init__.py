"""The free-text chat agent: pydantic-ai with the typed `ChatDeps`, its instructions, tools and model chain."""

__all__: list[str] = []
