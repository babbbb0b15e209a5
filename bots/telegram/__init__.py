"""Telegram: updates in as neutral messages, replies and digests out as HTML parts, documents and photos."""

from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.sender import TelegramSender
from bots.telegram.shared_limiter import FloodLimits, SharedRateLimiter, SlotReserver

__all__ = ["FloodLimits", "SharedRateLimiter", "SlotReserver", "TelegramFrontend", "TelegramOptions", "TelegramSender"]
