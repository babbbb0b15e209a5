"""Telegram: updates in as neutral messages; answers, status lines and digests out through one rate-limited Bot."""

from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.sender import TelegramLimits, TelegramSender, build_bot

__all__ = ["TelegramFrontend", "TelegramLimits", "TelegramOptions", "TelegramSender", "build_bot"]
