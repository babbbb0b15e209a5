"""Sharing monitors between chats: share/unshare, browse, subscribe/unsubscribe, a subscriber's own pause and
delivery mode, handing ownership over, and the offer to subscribe instead of creating a duplicate.

Whether a chat may take part at all (ALLOWED_*/ADMIN_USERS) is the caller's decision (agent and CLI check it);
what this module decides is which monitor a chat may see, subscribe to or change.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from monitors.destinations import DESTINATION_PLATFORMS
from monitors.notices import queue_notice
from monitors.service_base import MonitorStorage, ServiceStorage
from monitors.views import MonitorAccessError, MonitorNotFoundError, MonitorView, monitor_name
from storage import ChatRecord, Database, DeliveryMode, MonitorRecord, SubscriptionRecord
from storage.repositories import MonitorRepository, SubscriptionRepository

__all__ = [
    "BROWSE_LIMIT",
    "MonitorSharing",
    "NotSubscribedError",
    "SharedMonitor",
    "SubscribeOffer",
    "chat_label",
    "hand_over_monitors",
    "normalise_topic",
]

logger = logging.getLogger(__name__)

BROWSE_LIMIT = 8
"""Shared monitors one /browse shows (one Subscribe button each; Telegram and Slack show 8 comfortably)."""


class NotSubscribedError(MonitorNotFoundError):
    """The chat sees the monitor but has no subscription to change (or leave)."""


class _Monitors(Protocol):
    """What sharing needs of the monitor service."""

    async def chat(self, chat_id: int) -> ChatRecord: ...
    async def owned(self, monitor_id: int, chat_id: int, is_admin: bool) -> MonitorRecord: ...
    async def visible(self, monitor_id: int, chat_id: int, is_admin: bool) -> MonitorRecord: ...
    async def view_of(self, monitor: MonitorRecord, chat: ChatRecord) -> MonitorView: ...


@dataclass(frozen=True, kw_only=True)
class SharedMonitor:
    """One entry of /browse."""

    view: MonitorView
    """As the browsing chat sees it (its timezone, whether it already subscribes)."""
    owner: str
    """The owner chat's title ("#general", a person's name) or its platform when it has none."""


@dataclass(frozen=True, kw_only=True)
class SubscribeOffer:
    """A shared monitor `/track` found for the same topic: subscribe instead of creating a duplicate?"""

    view: MonitorView
    owner: str
    differences: tuple[str, ...]
    """What the shared monitor does differently from what was asked, one phrase each; empty when nothing."""


def normalise_topic(topic: str) -> str:
    """The topic as compared between monitors: case, width, punctuation and spacing do not matter
    (`"Open-Source LLM"` and `open source llm` are one topic); `+` and `#` stay (C++, C#)."""
    folded = unicodedata.normalize("NFKC", topic).casefold()
    return " ".join(re.sub(r"[^\w+#]+", " ", folded).split())


def chat_label(chat: ChatRecord) -> str:
    """How a chat is named to other chats: its title, else its platform."""
    return chat.title or f"a {chat.platform} chat"


class MonitorSharing(MonitorStorage):
    """Sharing and subscriptions, for the chat that asks; `MonitorService.sharing`, built in `app` over the
    catalogue."""

    def __init__(self, monitors: _Monitors, storage: ServiceStorage) -> None:
        super().__init__(storage)
        self._service = monitors

    # ---- the owner's side ---------------------------------------------------------------------------------

    async def share(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        """List the monitor in /browse so other chats may subscribe (owner or admin only)."""
        return await self._set_shared(monitor_id, chat_id=chat_id, is_admin=is_admin, shared=True)

    async def unshare(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        """Take it out of /browse; chats already subscribed keep receiving it."""
        return await self._set_shared(monitor_id, chat_id=chat_id, is_admin=is_admin, shared=False)

    async def _set_shared(self, monitor_id: int, *, chat_id: int, is_admin: bool, shared: bool) -> MonitorView:
        await self._service.owned(monitor_id, chat_id, is_admin)
        record = await self._monitors.update(monitor_id, shared=shared)
        if record is None:
            raise MonitorNotFoundError(_not_found(monitor_id))
        logger.info("monitor %d %s by chat %d", monitor_id, "shared" if shared else "unshared", chat_id)
        return await self._service.view_of(record, await self._service.chat(chat_id))

    async def subscribers(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> list[ChatRecord]:
        """The chats other than the owner that receive the monitor (owner or admin only)."""
        monitor = await self._service.owned(monitor_id, chat_id, is_admin)
        return [
            chat
            for subscription, chat in await self._subscriptions.with_chats(monitor_id)
            if chat.id != monitor.owner_chat_id
            and subscription.active
            and chat.active
            and chat.platform not in DESTINATION_PLATFORMS  # a destination cannot take a monitor over
        ]

    async def transfer(
        self, monitor_id: int, *, chat_id: int, to_chat: ChatRecord, is_admin: bool = False
    ) -> MonitorView:
        """Hand the monitor to another chat that subscribes to it; the old owner stays a subscriber. The new
        owner is told through the outbox."""
        monitor = await self._service.owned(monitor_id, chat_id, is_admin)
        if to_chat.id == monitor.owner_chat_id:
            raise ValueError(f"That chat already owns monitor #{monitor_id}.")
        subscription = await self._subscriptions.get(monitor_id, to_chat.id)
        if subscription is None or not subscription.active or not to_chat.active:
            raise ValueError(
                f"{chat_label(to_chat)} does not subscribe to monitor #{monitor_id}; only a subscriber can take it "
                f"over (they can `/subscribe {monitor_id}` once it is shared)."
            )
        previous = await self._service.chat(monitor.owner_chat_id)
        record = await self._hand_over(monitor, to_chat, reason=f"{chat_label(previous)} handed it over to you")
        return await self._service.view_of(record, await self._service.chat(chat_id))

    async def _hand_over(self, monitor: MonitorRecord, to_chat: ChatRecord, *, reason: str) -> MonitorRecord:
        record = await self._monitors.update(monitor.id, owner_chat_id=to_chat.id)
        if record is None:
            raise MonitorNotFoundError(_not_found(monitor.id))
        text = (
            f"You now own monitor {monitor_name(monitor.id, monitor.topic)}: {reason}. You can change it "
            f"(`/pause {monitor.id}`, `/untrack {monitor.id}`, `/share {monitor.id}`…); its subscribers keep it."
        )
        await queue_notice(self._database, chat_id=to_chat.id, text=text, monitor_id=monitor.id, now=self._clock())
        self._queued()
        logger.info("monitor %d handed over from chat %d to chat %d", monitor.id, monitor.owner_chat_id, to_chat.id)
        return record

    # ---- the subscriber's side ----------------------------------------------------------------------------

    async def browse(self, chat_id: int, *, words: str = "") -> list[SharedMonitor]:
        """Shared monitors whose topic contains every word of `words`, most received first."""
        chat = await self._service.chat(chat_id)
        wanted = normalise_topic(words).split()
        records = [
            record
            for record in await self._monitors.list_shared()
            if all(word in normalise_topic(record.topic) for word in wanted)
        ]
        counts = await self._subscriptions.counts([record.id for record in records])
        records.sort(key=lambda record: (-counts.get(record.id, 0), record.id))
        owners = {record.owner_chat_id: await self._chats.get(record.owner_chat_id) for record in records}
        entries = []
        for record in records:
            owner = owners.get(record.owner_chat_id)
            view = await self._service.view_of(record, chat)
            entries.append(SharedMonitor(view=view, owner=chat_label(owner) if owner else "a chat"))
        return entries

    async def subscribe(self, chat_id: int, monitor_id: int, *, is_admin: bool = False) -> tuple[MonitorView, bool]:
        """Put the chat on a shared monitor (an admin may subscribe to any); `(view, True)` when it was new,
        `(view, False)` when the chat already received it (a paused delivery is resumed)."""
        chat = await self._service.chat(chat_id)
        monitor = await self._monitors.get(monitor_id)
        if monitor is None:
            raise MonitorNotFoundError(_not_shared(monitor_id))
        existing = await self._subscriptions.get(monitor_id, chat.id)
        if not (monitor.shared or is_admin or monitor.owner_chat_id == chat.id or existing is not None):
            raise MonitorAccessError(_not_shared(monitor_id))
        await self._subscriptions.subscribe(monitor_id, chat.id)
        fresh = existing is None or not existing.active or existing.paused
        if existing is None:
            logger.info("chat %d subscribed to monitor %d", chat.id, monitor_id)
        return await self._service.view_of(monitor, chat), fresh

    async def unsubscribe(self, chat_id: int, monitor_id: int, *, is_admin: bool = False) -> MonitorView:
        """Take the chat off a monitor it receives. The owner cannot leave its own monitor (it deletes, pauses or
        hands it over instead)."""
        chat = await self._service.chat(chat_id)
        monitor = await self._service.visible(monitor_id, chat.id, is_admin)
        if monitor.owner_chat_id == chat.id:
            raise ValueError(
                f"This chat owns monitor #{monitor_id}: `/untrack {monitor_id}` deletes it, `/pause {monitor_id}` "
                f"pauses it, `/transfer {monitor_id} <chat>` hands it to a subscriber."
            )
        view = await self._service.view_of(monitor, chat)
        if not await self._subscriptions.unsubscribe(monitor_id, chat.id):
            raise NotSubscribedError(f"This chat does not receive monitor #{monitor_id}.")
        logger.info("chat %d unsubscribed from monitor %d", chat.id, monitor_id)
        return view

    async def pause_delivery(self, chat_id: int, monitor_id: int) -> tuple[MonitorView, bool]:
        """Stop the monitor's digests for this chat only; `(view, changed)`."""
        return await self._change(chat_id, monitor_id, paused=True)

    async def resume_delivery(self, chat_id: int, monitor_id: int) -> tuple[MonitorView, bool]:
        """Start the monitor's digests for this chat again; `(view, changed)`."""
        return await self._change(chat_id, monitor_id, paused=False)

    async def set_delivery(self, chat_id: int, monitor_id: int, mode: DeliveryMode) -> tuple[MonitorView, bool]:
        """Receive this monitor one message per run (`now`) or in the chat's briefing; `(view, changed)`."""
        return await self._change(chat_id, monitor_id, delivery=mode)

    async def _change(
        self, chat_id: int, monitor_id: int, *, paused: bool | None = None, delivery: DeliveryMode | None = None
    ) -> tuple[MonitorView, bool]:
        chat = await self._service.chat(chat_id)
        monitor = await self._service.visible(monitor_id, chat.id, False)
        before = await self._subscriptions.get(monitor_id, chat.id)
        if before is None:
            raise NotSubscribedError(
                f"This chat does not receive monitor #{monitor_id}; `/subscribe {monitor_id}` starts it."
            )
        if paused is not None:
            after = await self._subscriptions.update(monitor_id, chat.id, paused=paused)
        elif delivery is not None:
            after = await self._subscriptions.update(monitor_id, chat.id, delivery=delivery)
        else:
            after = before
        changed = after is not None and (after.paused, after.delivery) != (before.paused, before.delivery)
        return await self._service.view_of(monitor, chat), changed

    # ---- /track's offer -----------------------------------------------------------------------------------

    async def offer_for(
        self,
        chat_id: int,
        topic: str,
        *,
        sources: Sequence[str] = (),
        schedule_words: str | None = None,
    ) -> SubscribeOffer | None:
        """A shared monitor of another chat with the same (normalised) topic and compatible sources, which this
        chat does not receive yet: `/track` offers it instead of creating a duplicate. `sources` empty means "any"
        (the person named none); otherwise the shared monitor must search at least those."""
        chat = await self._service.chat(chat_id)
        key = normalise_topic(topic)
        mine = {subscription.monitor_id for subscription in await self._subscriptions.for_chat(chat.id)}
        candidates = [
            record
            for record in await self._monitors.list_shared()
            if normalise_topic(record.topic) == key
            and record.owner_chat_id != chat.id
            and record.id not in mine
            and not record.paused
            and set(sources) <= set(record.sources)
        ]
        if not candidates:
            return None
        counts = await self._subscriptions.counts([record.id for record in candidates])
        best = max(candidates, key=lambda record: (counts.get(record.id, 0), -record.id))
        view = await self._service.view_of(best, chat)
        owner = await self._chats.get(best.owner_chat_id)
        return SubscribeOffer(
            view=view,
            owner=chat_label(owner) if owner else "a chat",
            differences=_differences(view, sources=sources, schedule_words=schedule_words),
        )


def _differences(view: MonitorView, *, sources: Sequence[str], schedule_words: str | None) -> tuple[str, ...]:
    found: list[str] = []
    if schedule_words is not None and schedule_words != view.schedule:
        found.append(f"it runs {view.schedule} (you asked for {schedule_words})")
    extra = [spec for spec in view.sources if spec not in sources]
    if sources and extra:
        found.append(f"it also searches {', '.join(extra)}")
    elif not sources:
        found.append(f"it searches {', '.join(view.sources)}")
    if view.include_keywords:
        found.append(f"items must mention {', '.join(view.include_keywords)}")
    if view.exclude_keywords:
        found.append(f"it skips items mentioning {', '.join(view.exclude_keywords)}")
    if not view.quiet:
        found.append("it sends a short note when there is nothing new")
    return tuple(found)


async def hand_over_monitors(database: Database, chat: ChatRecord, *, now: datetime) -> list[int]:
    """The chat is gone (blocked, kicked, archived): each monitor it owns goes to its oldest subscriber that still
    receives it, who is told; monitors nobody else receives stay (paused with the chat). Returns the monitor ids
    handed over."""
    monitors, subscriptions = MonitorRepository(database), SubscriptionRepository(database)
    moved = []
    for monitor in await monitors.list_owned(chat.id):
        heirs = [
            (subscription, heir)
            for subscription, heir in await subscriptions.with_chats(monitor.id)
            if heir.id != chat.id and _receives(subscription, heir)
        ]
        if not heirs:
            continue
        _subscription, heir = heirs[0]  # oldest subscription first
        await monitors.update(monitor.id, owner_chat_id=heir.id)
        text = (
            f"You now own monitor {monitor_name(monitor.id, monitor.topic)}: the chat that owned it is gone, and yours "
            f"subscribed to it first. You can change it (`/pause {monitor.id}`, `/untrack {monitor.id}`, "
            f"`/share {monitor.id}`…); its other subscribers keep it."
        )
        await queue_notice(database, chat_id=heir.id, text=text, monitor_id=monitor.id, now=now)
        logger.info("monitor %d: owner chat %d is gone; handed over to chat %d", monitor.id, chat.id, heir.id)
        moved.append(monitor.id)
    return moved


def _receives(subscription: SubscriptionRecord, chat: ChatRecord) -> bool:
    """A chat that may take a monitor over: it receives it, and is a chat (a destination cannot own a monitor)."""
    return (
        subscription.active and not subscription.paused and chat.active and chat.platform not in DESTINATION_PLATFORMS
    )


def _not_found(monitor_id: int) -> str:
    return f"There is no monitor #{monitor_id} in this chat; /monitors lists yours."


def _not_shared(monitor_id: int) -> str:
    return f"There is no shared monitor #{monitor_id}; `/browse` lists the shared ones."
