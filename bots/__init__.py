"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name `__init__.pyi` imports loads on first use, so importing the package stays cheap."""
