"""Telegram's flood limits for one bot token, one definition for both rate limiters that keep to them: the
in-process `AIORateLimiter` (`TelegramLimits.rate_limiter`) and the database-shared `SharedRateLimiter`."""

from __future__ import annotations

from dataclasses import dataclass

from telegram.ext import AIORateLimiter

__all__ = ["TelegramLimits"]


@dataclass(frozen=True, kw_only=True)
class TelegramLimits:
    """The Bot API's flood limits (FACTS: ~30/s overall, 20/min per group; TELEGRAM_* settings)."""

    overall: float = 30.0
    """Calls to any chat per `period`, for the whole bot."""
    period: float = 1.0
    """Seconds; also a private chat's pace (one message per period, after `private_burst`)."""
    group: float = 20.0
    """Calls to one group (or channel) per `group_period`."""
    group_period: float = 60.0
    private_burst: int = 3
    """Messages a private chat may get back to back before its pace applies (the shared limiter only)."""
    max_retries: int = 2
    """A 429 that still happens is waited out (its retry_after) and retried this often by the in-process limiter."""

    @property
    def overall_interval(self) -> float:
        return self.period / self.overall

    @property
    def group_interval(self) -> float:
        # A group is a chat too: never faster than a private chat's one message per period.
        return max(self.group_period / self.group, self.period)

    def rate_limiter(self) -> AIORateLimiter:
        """The in-process limiter keeping to these limits (one process sending with the token)."""
        return AIORateLimiter(
            overall_max_rate=self.overall / self.period,
            overall_time_period=1,
            group_max_rate=self.group,
            group_time_period=self.group_period,
            max_retries=self.max_retries,
        )
