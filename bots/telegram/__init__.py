"""Telegram: updates in as neutral messages; answers, status lines and digests out through one rate-limited Bot."""

from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.sender import TelegramLimits, TelegramSender, build_bot
from bots.telegram.shared_limiter import FloodLimits, SharedRateLimiter

__all__ = [
    "FloodLimits",
    "SharedRateLimiter",
    "TelegramFrontend",
    "TelegramLimits",
    "TelegramOptions",
    "TelegramSender",
    "build_bot",
]
