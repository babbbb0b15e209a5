"""The terminal chat: a REPL on the dispatcher that prints replies, progress and delivered digests; its renderer
also draws the CLI's output."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name `__init__.pyi` imports loads on first use, so importing the package stays cheap."""
