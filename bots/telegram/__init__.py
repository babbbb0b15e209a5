"""Telegram: updates in as neutral messages; answers, status lines and digests out through one rate-limited Bot."""

from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.limits import TelegramLimits
from bots.telegram.sender import TelegramSender, build_bot
from bots.telegram.shared_limiter import SharedRateLimiter

__all__ = [
    "SharedRateLimiter",
    "TelegramFrontend",
    "TelegramLimits",
    "TelegramOptions",
    "TelegramSender",
    "build_bot",
]
