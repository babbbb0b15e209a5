"""Telegram: updates in as neutral messages, replies and digests out as HTML parts, documents and photos."""

from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.sender import TelegramSender
from bots.telegram.shared_limiter import FloodLimits, SharedRateLimiter

__all__ = ["FloodLimits", "SharedRateLimiter", "TelegramFrontend", "TelegramOptions", "TelegramSender"]
