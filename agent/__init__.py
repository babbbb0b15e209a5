"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name `__init__.pyi` imports loads on first use, so importing the package stays cheap."""
