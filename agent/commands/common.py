"""What every command handler shares: the chat's timezone, times and counts in words, and refusals."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.context import Services, Turn, chat_timezone
from kernel import Reply
from monitors import ChatBudget
from research import chat_folder

__all__ = ["chat_exports_dir", "chat_timezone", "chat_zone", "count", "local_time", "refuse"]


def chat_zone(turn: Turn, services: Services) -> ZoneInfo:
    """`chat_timezone` loaded; UTC if the stored name is no longer known to this machine's tz database."""
    try:
        return ZoneInfo(chat_timezone(turn, services))
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def chat_exports_dir(services: Services, turn: Turn) -> Path:
    """Where files made for this chat go: its own folder (`telegram-123456789`), the same for commands, the chat
    agent's tools and monitor runs, so two chats asking for the same thing in the same minute never overwrite
    each other's attachment."""
    return services.settings.exports_dir / chat_folder(turn.chat.platform, turn.chat.external_id)


def local_time(when: datetime, zone: ZoneInfo) -> str:
    """`2026-03-02 08:30 CET`: a time as the chat reads it."""
    return f"{when.astimezone(zone):%Y-%m-%d %H:%M %Z}"


def count(number: int, noun: str) -> str:
    """`1 item`, `12 items` (English plural by `s`)."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def refuse(reason: str, *, usage: str | None = None) -> list[Reply]:
    """One short true sentence about why nothing was done, with the command's usage line when the arguments
    were the problem."""
    text = reason.strip() or "That did not work."
    if usage is not None:
        if not text.endswith((".", "!", "?", "…", ":")):
            text += "."  # the reason is a sentence, and the usage line starts a new one
        # imported here: the catalogue is built from the family modules, which use this function
        from agent.commands.catalogue import usage_of

        text += f"\nUsage: {usage_of(usage)}"
    return [Reply(text=text)]


BUDGET_SPENT_NOTE = (
    "Today's model budget for this chat is spent, so this ran without the language model "
    "(heuristic checks, an extractive digest); it renews at midnight UTC."
)


async def models_allowed(services: Services, turn: Turn) -> bool:
    """Whether a command may spend model tokens for this chat today (CHAT_DAILY_TOKENS not yet spent).

    A command whose chat has spent its budget still works: it runs the model-free path instead.
    """
    budget = ChatBudget(usage=services.chats.usage, daily_tokens=services.settings.chat_daily_tokens)
    if turn.state is None:
        return await budget.allows(turn.chat.id, services.clock())
    return not budget.spent(turn.state.tokens_today)  # read with the turn
