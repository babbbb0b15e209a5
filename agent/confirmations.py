"""Monitor changes proposed in free text wait for the person's "yes": the proposals, where they wait (stored with
the conversation, so they survive a restart and work across processes), how long, and what confirming them does."""

from __future__ import annotations

import logging
import re
import secrets
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agent import subscribing
from agent.context import DEFAULT_CONFIRMATION_TTL, Services, Turn
from kernel import Button
from monitors import (
    ChatService,
    MonitorNotFoundError,
    MonitorService,
    ScheduleError,
)
from storage import ConversationRecord, JSONObject

__all__ = [
    "CANCEL_PREFIX",
    "CONFIRM_PREFIX",
    "DEFAULT_CONFIRMATION_TTL",
    "ActionRunner",
    "CatalogueAction",
    "MonitorAction",
    "PendingConfirmation",
    "TransferAction",
    "answer_of",
    "execute_actions",
]

logger = logging.getLogger(__name__)

CONFIRM_PREFIX = "confirm:"
CANCEL_PREFIX = "cancel:"


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True)

    description: str
    """What will happen, in words, shown to the person before they confirm."""


class CatalogueAction(_Action):
    """A proposal of one action of the catalogue: its name and arguments, carried out on "yes" by the same `run` as
    its command."""

    kind: Literal["action"] = "action"
    action: str
    """The action's name (`pause`)."""
    arguments: JSONObject
    """Its arguments model, as JSON."""


_LEGACY_KINDS = {"pause": "pause", "resume": "resume", "delete": "untrack", "subscribe": "subscribe",
                 "unsubscribe": "unsubscribe"}  # fmt: skip
"""Proposals stored by versions before the catalogue, by their `kind`, and the action that now carries them out."""


def _legacy(stored: Any) -> Any:
    """A proposal stored before the catalogue (`{"kind": "pause", "monitor_id": 3, …}`) as a `CatalogueAction`."""
    if not isinstance(stored, dict):
        return stored
    kind, description = stored.get("kind"), stored.get("description", "")
    if kind in _LEGACY_KINDS and "monitor_id" in stored:
        action, arguments = _LEGACY_KINDS[kind], {"monitor_id": stored["monitor_id"]}
    elif kind == "create" and "topic" in stored:
        arguments = {
            "topic": stored["topic"],
            "schedule": stored.get("schedule_text") or "daily at 09:00",
            "sources": stored.get("sources") or None,
        }
        action = "create"
    elif kind == "update" and "monitor_id" in stored:
        fields = ("monitor_id", "topic", "sources", "include_keywords", "exclude_keywords", "quiet")
        arguments = {field: stored.get(field) for field in fields} | {"schedule": stored.get("schedule_text")}
        action = "update"
    elif kind == "import" and "entries" in stored:
        action, arguments = "import_entries", {"entries": stored["entries"]}
    elif kind == "share" and "monitor_id" in stored:
        action, arguments = "share", {"monitor_id": stored["monitor_id"], "shared": stored.get("shared", True)}
    elif kind == "delivery" and "monitor_id" in stored:
        paused = stored.get("paused")
        how = stored.get("mode") if paused is None else ("pause" if paused else "resume")
        action, arguments = "deliver", {"monitor_id": stored["monitor_id"], "how": how}
    elif kind == "briefing" and "schedule_text" in stored:
        text = stored["schedule_text"]
        action, arguments = "briefing", ({"off": True} if text is None else {"schedule": text})
    else:
        return stored
    return {"kind": "action", "description": description, "action": action, "arguments": arguments}


class TransferAction(_Action):
    """A hand-over proposed before the catalogue (now `transfer_monitor` proposes the /transfer action); kept so
    such a stored proposal still confirms."""

    kind: Literal["transfer"] = "transfer"
    monitor_id: int
    to_chat_id: int


MonitorAction = Annotated[
    CatalogueAction | TransferAction,
    Field(discriminator="kind"),
    BeforeValidator(_legacy),
]


class PendingConfirmation(BaseModel):
    """Changes one agent reply proposed, waiting for a "yes" from the person who asked.

    Stored with the conversation (`storage.ConversationRecord.confirmation`), so a "yes" typed after a restart, or
    answered by another process, still confirms; at most one per conversation (a newer proposal replaces it)."""

    model_config = ConfigDict(frozen=True)

    token: str
    """Carried by its buttons; claimed atomically when answered, so it is carried out once."""
    chat_id: int
    thread_key: str
    user_id: int
    is_admin: bool
    actions: tuple[MonitorAction, ...]
    expires_at: AwareDatetime
    after_untrusted_text: bool = False
    """The proposal came after the agent read fetched text: the person is told to check it is what they asked."""
    declined: tuple[MonitorAction, ...] = ()
    """What "no" does instead of nothing (e.g. create your own monitor rather than subscribe to a shared one)."""
    labels: tuple[str, str] = ("Yes, do it", "Cancel")
    """The two buttons' labels: confirm, then decline."""

    @classmethod
    def open(
        cls,
        turn: Turn,
        *,
        actions: Sequence[MonitorAction],
        now: datetime,
        ttl: timedelta = DEFAULT_CONFIRMATION_TTL,
        after_untrusted_text: bool = False,
        declined: Sequence[MonitorAction] = (),
        labels: tuple[str, str] = ("Yes, do it", "Cancel"),
    ) -> PendingConfirmation:
        """A new confirmation with a fresh token, open for `ttl`, for the person of `turn` in its conversation."""
        return cls(
            token=secrets.token_urlsafe(12),
            chat_id=turn.chat.id,
            thread_key=turn.incoming.thread_key,
            user_id=turn.user.id,
            is_admin=turn.is_admin,
            actions=tuple(actions),
            expires_at=now + ttl,
            after_untrusted_text=after_untrusted_text,
            declined=tuple(declined),
            labels=labels,
        )

    @classmethod
    def stored(cls, record: ConversationRecord | None, *, now: datetime) -> PendingConfirmation | None:
        """The confirmation open in a stored conversation, or None (none, expired, or unreadable)."""
        if record is None or record.confirmation is None or record.confirmation_token is None:
            return None
        try:
            pending = cls.model_validate(record.confirmation)
        except ValidationError:  # written by an incompatible version: as if it had expired
            logger.warning("conversation %d: unreadable open confirmation ignored", record.id)
            return None
        if pending.token != record.confirmation_token or pending.expires_at <= now:
            return None
        return pending

    def stored_form(self) -> tuple[str, JSONObject]:
        """What `storage.ConversationChanges.confirmation` takes."""
        return self.token, self.model_dump(mode="json")

    @classmethod
    async def offer(
        cls,
        services: Services,
        turn: Turn,
        actions: Sequence[MonitorAction],
        *,
        ttl: timedelta,
        declined: Sequence[MonitorAction] = (),
        labels: tuple[str, str],
    ) -> PendingConfirmation:
        """A command's offer: a new confirmation, stored in the turn's conversation at once (replacing any other)."""
        now = services.clock()
        pending = cls.open(turn, actions=actions, now=now, ttl=ttl, declined=declined, labels=labels)
        await pending.store(services.chats, now=now)
        return pending

    async def store(self, chats: ChatService, *, now: datetime) -> None:
        """Open it in its conversation, replacing any other (what a command's offer does; the chat agent stores its
        proposals with the turn's one write instead)."""
        await chats.conversations.write(self.chat_id, self.thread_key, {"confirmation": self.stored_form()}, now=now)

    @staticmethod
    def minutes_open(ttl: timedelta) -> int:
        """The ttl in whole minutes, as the prompt states it."""
        return max(1, int(ttl.total_seconds() // 60))

    @property
    def buttons(self) -> tuple[Button, Button]:
        return (
            Button(label=self.labels[0], callback_data=f"{CONFIRM_PREFIX}{self.token}"),
            Button(label=self.labels[1], callback_data=f"{CANCEL_PREFIX}{self.token}"),
        )

    def prompt(self, *, minutes: int) -> str:
        """The markdown block under the agent's answer that says what will happen and how to confirm."""
        lines = ["**Needs your confirmation:**", *(f"- {action.description}" for action in self.actions)]
        if self.after_untrusted_text:
            lines.append("⚠️ I proposed this after reading fetched content; make sure it is what *you* asked for.")
        lines.append(self.how_to_answer(minutes=minutes))
        return "\n".join(lines)

    def how_to_answer(self, *, minutes: int) -> str:
        """The last line of a prompt: the buttons, or yes/no, and what each does."""
        if self.declined:
            no = "; ".join(action.description for action in self.declined)
            return f"Press a button, or reply **yes** for the first or **no** to {no} (open for {minutes} minutes)."
        return f"Press a button, or reply **yes** to confirm or **no** to cancel (open for {minutes} minutes)."


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


ActionRunner = Callable[[CatalogueAction], Awaitable[str]]
"""Runs a confirmed catalogue action for the chat that proposed it, and says what happened."""


async def _execute(
    action: MonitorAction, service: MonitorService, *, chat_id: int, is_admin: bool, run_action: ActionRunner
) -> str:
    if isinstance(action, TransferAction):  # stored before the catalogue
        to_chat = await service.chat(action.to_chat_id)
        return await subscribing.transfer(service, chat_id, action.monitor_id, to_chat, is_admin=is_admin)
    return await run_action(action)


async def execute_actions(
    pending: PendingConfirmation, service: MonitorService, *, run_action: ActionRunner, declined: bool = False
) -> str:
    """Carry out every confirmed action (or, with `declined`, what "no" does), in order; each line says what
    happened (a failure does not stop the rest)."""
    lines = []
    for action in pending.declined if declined else pending.actions:
        try:
            lines.append(
                await _execute(
                    action, service, chat_id=pending.chat_id, is_admin=pending.is_admin, run_action=run_action
                )
            )
        except (MonitorNotFoundError, ScheduleError, ValueError) as error:
            lines.append(f"Could not {action.description[0].lower()}{action.description[1:]}: {error}")
    return "\n\n".join(lines)
