"""Monitor changes proposed in free text wait for the person's "yes": the proposals, where they wait, how long,
and what confirming them does."""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from agent.messages import Button
from monitors import MonitorNotFoundError, MonitorService, MonitorView, ScheduleError

__all__ = [
    "CANCEL_PREFIX",
    "CONFIRM_PREFIX",
    "DEFAULT_CONFIRMATION_TTL",
    "ConfirmationBook",
    "CreateMonitorAction",
    "DeleteMonitorAction",
    "MonitorAction",
    "PauseMonitorAction",
    "PendingConfirmation",
    "ResumeMonitorAction",
    "UpdateMonitorAction",
    "answer_of",
    "execute_actions",
]

CONFIRM_PREFIX = "confirm:"
CANCEL_PREFIX = "cancel:"
DEFAULT_CONFIRMATION_TTL = timedelta(minutes=10)


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True)

    description: str
    """What will happen, in words, shown to the person before they confirm."""


class CreateMonitorAction(_Action):
    kind: Literal["create"] = "create"
    topic: str
    schedule_text: str
    """In the /track grammar, already checked by `parse_schedule`."""
    sources: tuple[str, ...] = ()
    """Source specs; empty for the default mix."""
    timezone: str


class UpdateMonitorAction(_Action):
    kind: Literal["update"] = "update"
    monitor_id: int
    topic: str | None = None
    schedule_text: str | None = None
    sources: tuple[str, ...] | None = None
    include_keywords: tuple[str, ...] | None = None
    exclude_keywords: tuple[str, ...] | None = None
    quiet: bool | None = None
    """True: a run with nothing new sends nothing; False: a short "nothing new" note (what `/quiet` sets)."""


class DeleteMonitorAction(_Action):
    kind: Literal["delete"] = "delete"
    monitor_id: int


class PauseMonitorAction(_Action):
    kind: Literal["pause"] = "pause"
    monitor_id: int


class ResumeMonitorAction(_Action):
    kind: Literal["resume"] = "resume"
    monitor_id: int


MonitorAction = Annotated[
    CreateMonitorAction | UpdateMonitorAction | DeleteMonitorAction | PauseMonitorAction | ResumeMonitorAction,
    Field(discriminator="kind"),
]


@dataclass(frozen=True, kw_only=True)
class PendingConfirmation:
    """Changes one agent reply proposed, waiting for a "yes" from the person who asked."""

    token: str
    chat_id: int
    thread_key: str
    user_id: int
    is_admin: bool
    actions: tuple[MonitorAction, ...]
    expires_at: datetime
    after_untrusted_text: bool = False
    """The proposal came after the agent read fetched text: the person is told to check it is what they asked."""

    @property
    def buttons(self) -> tuple[Button, Button]:
        return (
            Button(label="Yes, do it", callback_data=f"{CONFIRM_PREFIX}{self.token}"),
            Button(label="Cancel", callback_data=f"{CANCEL_PREFIX}{self.token}"),
        )

    def prompt(self, *, minutes: int) -> str:
        """The markdown block under the agent's answer that says what will happen and how to confirm."""
        lines = ["**Needs your confirmation:**", *(f"- {action.description}" for action in self.actions)]
        if self.after_untrusted_text:
            lines.append("⚠️ I proposed this after reading fetched content; make sure it is what *you* asked for.")
        lines.append(f"Press a button, or reply **yes** to confirm or **no** to cancel (open for {minutes} minutes).")
        return "\n".join(lines)


@dataclass
class ConfirmationBook:
    """The open confirmations of this process, one per conversation at most (a newer proposal replaces the older).

    Kept in memory: a restart drops open confirmations (the person is told it expired and can ask again).
    """

    clock: Callable[[], datetime]
    ttl: timedelta = DEFAULT_CONFIRMATION_TTL
    _open: dict[str, PendingConfirmation] = field(default_factory=dict)

    def open(
        self,
        *,
        chat_id: int,
        thread_key: str,
        user_id: int,
        is_admin: bool,
        actions: Sequence[MonitorAction],
        after_untrusted_text: bool = False,
    ) -> PendingConfirmation:
        self._drop_expired()
        for token in [t for t, p in self._open.items() if (p.chat_id, p.thread_key) == (chat_id, thread_key)]:
            del self._open[token]
        pending = PendingConfirmation(
            token=secrets.token_urlsafe(12),
            chat_id=chat_id,
            thread_key=thread_key,
            user_id=user_id,
            is_admin=is_admin,
            actions=tuple(actions),
            expires_at=self.clock() + self.ttl,
            after_untrusted_text=after_untrusted_text,
        )
        self._open[pending.token] = pending
        return pending

    def get(self, token: str) -> PendingConfirmation | None:
        self._drop_expired()
        return self._open.get(token)

    def for_conversation(self, chat_id: int, thread_key: str) -> PendingConfirmation | None:
        self._drop_expired()
        return next((p for p in self._open.values() if (p.chat_id, p.thread_key) == (chat_id, thread_key)), None)

    def close(self, token: str) -> PendingConfirmation | None:
        """Take the confirmation out (it is being answered); None if it is gone or expired."""
        self._drop_expired()
        return self._open.pop(token, None)

    def _drop_expired(self) -> None:
        now = self.clock()
        for token in [t for t, p in self._open.items() if p.expires_at <= now]:
            del self._open[token]


_YES = {
    "yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "confirm", "confirmed", "do it", "go ahead", "yes please",
    "oui", "si", "sí", "ja", "jawohl", "da", "да", "sim", "tak", "evet", "是", "是的", "好", "好的", "确认", "對", "对",
    "はい", "네", "예",
}  # fmt: skip
_NO = {
    "no", "n", "nope", "cancel", "stop", "don't", "dont", "no thanks", "abort",
    "non", "nein", "нет", "não", "nao", "nie", "hayır", "不", "不要", "取消", "否", "いいえ", "아니요", "아니",
}  # fmt: skip


def answer_of(text: str) -> Literal["yes", "no"] | None:
    """Whether a short message means yes or no (in a few languages); None for anything else."""
    normalised = unicodedata.normalize("NFKC", text).casefold().strip()
    normalised = re.sub(r"[\s.!?。！？,，~]+$", "", normalised)
    normalised = " ".join(normalised.split())
    if normalised in _YES:
        return "yes"
    if normalised in _NO:
        return "no"
    return None


def _local(moment: datetime, timezone: str) -> str:
    # shown in the schedule's own zone: the monitor service's views use the chat's stored zone, which is still
    # "UTC" for a chat that relies on the deployment's default timezone
    return f"{moment.astimezone(ZoneInfo(timezone)):%Y-%m-%d %H:%M %Z}"


def _created(view: MonitorView, timezone: str) -> str:
    next_run = _local(view.next_run, timezone) if view.next_run else "paused"
    return (
        f"Created monitor **#{view.id} {view.topic}**: {view.schedule}; next run {next_run}; "
        f"sources: {', '.join(view.sources)}."
    )


async def _execute(action: MonitorAction, service: MonitorService, *, chat_id: int, is_admin: bool) -> str:
    match action:
        case CreateMonitorAction():
            view = await service.create_monitor(
                chat_id,
                action.topic,
                schedule_text=action.schedule_text,
                sources=list(action.sources) or None,
                timezone=action.timezone,
            )
            return _created(view, action.timezone)
        case UpdateMonitorAction():
            view = await service.update_monitor(
                action.monitor_id,
                chat_id=chat_id,
                is_admin=is_admin,
                topic=action.topic,
                schedule_text=action.schedule_text,
                sources=list(action.sources) if action.sources is not None else None,
                include_keywords=action.include_keywords,
                exclude_keywords=action.exclude_keywords,
                quiet=action.quiet,
            )
            return f"Updated monitor:\n{view.summary()}"
        case DeleteMonitorAction():
            view = await service.delete(action.monitor_id, chat_id=chat_id, is_admin=is_admin)
            return f"Deleted monitor **#{view.id} {view.topic}**."
        case PauseMonitorAction():
            view = await service.pause(action.monitor_id, chat_id=chat_id, is_admin=is_admin)
            return f"Paused monitor **#{view.id} {view.topic}**; /resume {view.id} starts it again."
        case ResumeMonitorAction():
            view = await service.resume(action.monitor_id, chat_id=chat_id, is_admin=is_admin)
            next_run = f"{view.next_run:%Y-%m-%d %H:%M %Z}" if view.next_run else "not scheduled"
            return f"Resumed monitor **#{view.id} {view.topic}**; next run {next_run}."


async def execute_actions(pending: PendingConfirmation, service: MonitorService) -> str:
    """Carry out every confirmed action, in order; each line says what happened (a failure does not stop the rest)."""
    lines = []
    for action in pending.actions:
        try:
            lines.append(await _execute(action, service, chat_id=pending.chat_id, is_admin=pending.is_admin))
        except (MonitorNotFoundError, ScheduleError, ValueError) as error:
            lines.append(f"Could not {action.description[0].lower()}{action.description[1:]}: {error}")
    return "\n\n".join(lines)
