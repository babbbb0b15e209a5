"""Destinations: digests delivered outside the chat platforms, to an Apprise URL (email, Discord, Matrix, ntfy, …) or
to a signed JSON webhook.

A destination is a chat of its own platform (`apprise` or `webhook`), so subscriptions, the outbox (parts stored as
sent, the one retry rule, "gone"), briefings and `/monitors`' receiver counts work for it unchanged; its row in
`destinations` holds what only it has: the URL (a secret), the webhook's HMAC key, the chat that added it, a masked
label and its failure streak. This module reads and checks URLs and keeps the list; `destination_send.py` sends.

Guarantees: a URL is never logged, never put in a reply or a model's prompt (the masked `label` is), and is refused
when the host it names is private or loopback unless ALLOW_PRIVATE_URLS=true (the fetching guard,
`HttpClient.check_untrusted`); a URL Apprise cannot read is refused with one sentence.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

from kernel import Clock, utc_now
from sources import HttpClient, SourceError, SourceErrorKind
from storage import Database, DestinationRecord
from storage.repositories import ChatRepository, DestinationRepository, SubscriptionRepository

if TYPE_CHECKING:  # sharing imports this module's platforms: these are types only
    from apprise.plugins.base import NotifyBase

    from monitors.destination_send import DestinationSenders
    from monitors.sharing import MonitorSharing
    from monitors.views import MonitorView

__all__ = [
    "APPRISE_PLATFORM",
    "DESTINATION_PLATFORMS",
    "PAUSE_AFTER",
    "WEBHOOK_PLATFORM",
    "WEBHOOK_PREFIX",
    "DestinationError",
    "DestinationKind",
    "DestinationService",
    "DestinationURL",
    "apprise_plugin",
    "read_destination_url",
]

logger = logging.getLogger(__name__)

APPRISE_PLATFORM: Final = "apprise"
"""`chats.platform` of a destination reached through Apprise (email and chat-like services)."""
WEBHOOK_PLATFORM: Final = "webhook"
"""`chats.platform` of a signed JSON webhook."""
DESTINATION_PLATFORMS: Final = frozenset({APPRISE_PLATFORM, WEBHOOK_PLATFORM})
WEBHOOK_PREFIX: Final = "webhook+"
"""`webhook+https://host/path`: Lookout's own signed JSON document, POSTed to `https://host/path`."""
EMAIL_SCHEMES: Final = frozenset({"mailto", "mailtos"})
PAUSE_AFTER: Final = timedelta(days=3)
"""A destination failing this long without one success is paused (DESTINATION_PAUSE_DAYS), and its adder told."""
MAX_URL_CHARS: Final = 2000
"""Longer than any Apprise URL a person writes; bounds what is stored."""

DestinationKind = Literal["email", "chat", "webhook"]


class DestinationError(ValueError):
    """A destination URL or request Lookout cannot use; the message is one sentence for the person (never the URL)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationURL:
    """A destination URL read and checked: what it is, what to store, what to show."""

    kind: DestinationKind
    url: str
    """What is stored and used: the Apprise URL, or the webhook's own http(s) URL (without `webhook+`)."""
    label: str
    """The URL masked, for lists and messages."""
    hosts: tuple[tuple[str, int], ...]
    """The hosts (and ports) the person chose, which the address guard checks; empty for services whose host is
    fixed (Discord, Telegram, ntfy.sh …)."""


def apprise_plugin(url: str) -> NotifyBase | None:
    """Apprise's service object for `url`, or None when Apprise cannot read it (import deferred: ~0.5 s)."""
    import apprise

    return apprise.Apprise.instantiate(url)


def read_destination_url(text: str) -> DestinationURL:
    """Read a destination URL; raises `DestinationError` with one sentence when it cannot be used."""
    url = text.strip().strip("<>")
    if not url or len(url) > MAX_URL_CHARS or any(c.isspace() for c in url):
        raise DestinationError("That is not a destination URL: give one Apprise URL like mailtos://… or ntfy://….")
    if url.lower().startswith(WEBHOOK_PREFIX):
        return _webhook_url(url[len(WEBHOOK_PREFIX) :])
    scheme = url.partition("://")[0].lower()
    if not scheme or "://" not in url:
        raise DestinationError(
            "That is not an Apprise URL: it needs a scheme such as mailtos://, discord://, ntfy:// or webhook+https://."
        )
    plugin = apprise_plugin(url)
    if plugin is None:
        raise DestinationError(
            f"Apprise cannot read that {scheme}:// URL: check the service's URL format at "
            "https://github.com/caronc/apprise/wiki (nothing was saved)."
        )
    kind: DestinationKind = "email" if scheme in EMAIL_SCHEMES else "chat"
    return DestinationURL(kind=kind, url=url, label=_masked(plugin), hosts=_chosen_hosts(plugin))


def _webhook_url(url: str) -> DestinationURL:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationError("A webhook is written webhook+https://host/path (an http or https URL after webhook+).")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DestinationError("That webhook URL has a port that is not a number.") from None
    shown_port = f":{parts.port}" if parts.port else ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    tail = "/…" if parts.path.strip("/") or parts.query else ""
    label = f"{WEBHOOK_PREFIX}{parts.scheme}://{host}{shown_port}{tail}"
    return DestinationURL(kind="webhook", url=url, label=label, hosts=((parts.hostname, port),))


def _masked(plugin: NotifyBase) -> str:
    """Apprise's own masked form of the URL (passwords and tokens elided), without its query of defaults, and with
    each path segment Apprise shows whole cut to its first two characters: an ntfy topic or a webhook path is a
    secret too (whoever knows it reads or writes there)."""
    private = str(plugin.url(privacy=True)).partition("?")[0]  # type: ignore[no-untyped-call]
    scheme, _, rest = private.partition("://")
    host, _, path = rest.partition("/")
    login, at, name = host.rpartition("@")
    bare = name[: name.find("]") + 1] if name.startswith("[") else name.partition(":")[0]
    if not _names_a_host(bare):
        host = f"{login}{at}{_cut(name)}"  # a token in host position (ntfy.sh's topic, a bot token)
    segments = [_cut(segment) for segment in path.split("/") if segment]
    return f"{scheme}://{host}" + "".join(f"/{segment}" for segment in segments)


def _cut(segment: str) -> str:
    if "..." in segment or "*" in segment or len(segment) <= 4:
        return segment  # masked by Apprise already, or too short to tell anything
    return segment[:2] + "…"


def _names_a_host(host: str) -> bool:
    """Whether an Apprise URL's host part is a network host (a dotted name, an IP literal, localhost) rather than
    a token in host position (Discord's webhook id, ntfy.sh's topic, a Telegram bot token)."""
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare)
        return True
    except ValueError:
        return "." in bare or bare.lower() == "localhost"


def _chosen_hosts(plugin: NotifyBase) -> tuple[tuple[str, int], ...]:
    port = int(getattr(plugin, "port", None) or 0)
    hosts: list[tuple[str, int]] = []
    for name in (getattr(plugin, "host", None), getattr(plugin, "smtp_host", None)):
        if isinstance(name, str) and name and _names_a_host(name) and (name, port) not in hosts:
            hosts.append((name, port))
    return tuple(hosts)


async def check_hosts(http: HttpClient, destination: DestinationURL) -> None:
    """Refuse a destination whose chosen host resolves to a private, loopback or otherwise non-public address (the
    same guard and ALLOW_PRIVATE_URLS as fetching); raises `DestinationError`."""
    for host, port in destination.hosts:
        shown = f"[{host}]" if ":" in host else host
        try:
            await http.check_untrusted(f"https://{shown}:{port or 443}/")
        except SourceError as error:
            if error.kind is SourceErrorKind.BLOCKED:
                raise DestinationError(
                    f"{shown} is a private or loopback address; destinations there need ALLOW_PRIVATE_URLS=true."
                ) from None
            raise DestinationError(f"{shown} is not a host Lookout can reach.") from None


class DestinationService:
    """Add, list, test and remove destinations, subscribe them to monitors and to a chat's briefing. Every call
    scoped to a chat (`chat_id`) sees only the destinations that chat added; `chat_id=None` is the operator (CLI)."""

    def __init__(
        self,
        database: Database,
        *,
        http: HttpClient,
        senders: DestinationSenders,
        sharing: MonitorSharing,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._http = http
        self.senders = senders
        self._sharing = sharing
        self._clock = clock
        self._destinations = DestinationRepository(database)

    async def add(self, text: str, *, added_by_chat_id: int | None) -> tuple[DestinationRecord, str | None]:
        """The destination for this URL (the one this chat added before, else a new one), and a new webhook's
        signing secret (shown once; None otherwise). Raises `DestinationError`."""
        destination = read_destination_url(text)
        await check_hosts(self._http, destination)
        for known in await self._destinations.all(added_by_chat_id=added_by_chat_id):
            if known.url == destination.url and (known.added_by_chat_id == added_by_chat_id):
                return known, None
        secret = secrets.token_urlsafe(32) if destination.kind == "webhook" else None
        platform = WEBHOOK_PLATFORM if destination.kind == "webhook" else APPRISE_PLATFORM
        record = await self._destinations.add(
            platform=platform,
            external_id=f"d-{secrets.token_hex(8)}",
            kind=destination.kind,
            url=destination.url,
            secret=secret,
            label=destination.label,
            added_by_chat_id=added_by_chat_id,
            now=self._clock(),
        )
        logger.info("destination %d added (%s, %s) by chat %s", record.id, record.kind, record.label, added_by_chat_id)
        return record, secret

    async def subscribe(
        self, monitor_id: int, text: str, *, added_by_chat_id: int | None
    ) -> tuple[MonitorView, DestinationRecord, str | None, bool]:
        """Add (or find) the destination and have it receive the monitor's digests. The caller has checked that the
        chat owns the monitor or the person is an admin. Returns the monitor, the destination, a new webhook's secret
        and whether the subscription is new."""
        record, secret = await self.add(text, added_by_chat_id=added_by_chat_id)
        view, fresh = await self._sharing.subscribe(record.chat_id, monitor_id, is_admin=True)
        return view, record, secret, fresh

    async def follow_briefing(self, text: str, *, chat_id: int) -> tuple[DestinationRecord, str | None]:
        """Add (or find) the destination and have it receive a copy of `chat_id`'s briefing."""
        record, secret = await self.add(text, added_by_chat_id=chat_id)
        await self._destinations.set_briefing_of(record.id, chat_id)
        return record, secret

    async def listing(self, *, chat_id: int | None) -> list[tuple[DestinationRecord, list[int]]]:
        """The destinations (each with the monitors it receives) the chat added, or all for the operator."""
        records = await self._destinations.all(added_by_chat_id=chat_id)
        subscriptions = SubscriptionRepository(self._database)
        return [
            (record, sorted(sub.monitor_id for sub in await subscriptions.for_chat(record.chat_id)))
            for record in records
        ]

    async def get(self, destination_id: int, *, chat_id: int | None) -> DestinationRecord:
        """The destination, if this chat added it (any for the operator); raises `DestinationError`."""
        record = await self._destinations.get(destination_id)
        if record is None or (chat_id is not None and record.added_by_chat_id != chat_id):
            raise DestinationError(
                f"There is no destination #{destination_id} added from this chat (see /destinations)."
            )
        return record

    async def remove(self, destination_id: int, *, chat_id: int | None) -> DestinationRecord:
        """Delete the destination, its subscriptions and pending deliveries (its chat row goes, cascading)."""
        record = await self.get(destination_id, chat_id=chat_id)
        await ChatRepository(self._database).delete(record.chat_id)
        logger.info("destination %d removed", record.id)
        return record

    async def test(self, destination_id: int, *, chat_id: int | None) -> DestinationRecord:
        """Send a short message now (not through the outbox: the person waits for the outcome). A success ends a
        failure streak and resumes a paused destination. Raises `DestinationError` saying why it failed."""
        record = await self.get(destination_id, chat_id=chat_id)
        await self.senders.send_test(record)
        if not record.active:
            await ChatRepository(self._database).update(record.chat_id, active=True)
            await SubscriptionRepository(self._database).set_active_for_chat(record.chat_id, active=True)
        return record

    @staticmethod
    def describe(record: DestinationRecord, monitors: list[int] | None = None) -> str:
        """One line for a list: number, masked URL, what it receives, its state."""
        what = ", ".join(f"#{m}" for m in monitors) if monitors else "no monitor"
        state = "" if record.active else " — paused (`test` resumes it)"
        if record.active and record.failing_since is not None:
            state = f" — failing since {record.failing_since:%Y-%m-%d %H:%M} UTC"
        briefing = " and this chat's briefing" if record.briefing_of_chat_id is not None else ""
        return f"#{record.id} {record.kind} `{record.label}`: {what}{briefing}{state}"
