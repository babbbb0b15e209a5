"""Monitors in and out of Lookout: a chat's monitors as JSON (everything needed to make them again) plus an OPML
file of their `rss:` feeds, and the reading of such files (or a feed reader's OPML export) into monitors to create.

Guarantees: exporting, importing into a chat and exporting again gives the same monitors (`monitors` of the JSON);
a bad entry is listed with its reason and never stops the good ones; files are read within stated limits
(`MAX_IMPORT_BYTES` counted on the bytes actually read, so a pipe or a lying size cannot exceed it;
`MAX_IMPORT_MONITORS`), and OPML is checked by `sources.guard_xml` (defusedxml: a file that declares or uses XML
entities, nests too deep or lists too many outlines is refused with the reason) before `listparser` reads it.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monitors.alerts import MAX_ALERTS_PER_CHAT, MAX_CONDITION_CHARS
from monitors.schedule import DEFAULT_SCHEDULE_TEXT, ScheduleError
from monitors.service import MonitorService, schedule_of
from monitors.views import monitor_name
from research import ReaderRules, escape_markdown
from sources import SourceError, guard_xml
from storage import ChatRecord, DeliveryMode, FeedbackMarkRecord, MonitorRecord
from storage.repositories import AlertRepository, FeedbackRepository, MonitorRepository, SubscriptionRepository

__all__ = [
    "EXPORT_FORMAT",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_MONITORS",
    "MAX_SOURCES_PER_MONITOR",
    "AlertEntry",
    "ExportedMonitors",
    "FeedbackEntry",
    "ImportPlan",
    "ImportResult",
    "MonitorEntry",
    "ReceivedEntry",
    "Refused",
    "create_imported",
    "export_monitors",
    "plan_import",
    "read_import_file",
    "read_monitor_file",
]

logger = logging.getLogger(__name__)

EXPORT_FORMAT: Final = "lookout.monitors"
EXPORT_VERSION: Final = 1
MAX_IMPORT_BYTES: Final = 1_000_000
"""A file to import may be at most this big (1 MB: thousands of monitors' worth of JSON, ~5,000 OPML feeds)."""
MAX_IMPORT_MONITORS: Final = 100
"""At most this many monitors are created from one file; a longer file is refused as a whole."""
MAX_SOURCES_PER_MONITOR: Final = 50
"""An OPML folder with more feeds than this is refused (one monitor would search them all on every run)."""


MAX_EXPORTED_MARKS: Final = 500
"""Feedback marks kept per monitor in an export (the newest): more says nothing the last few hundred do not."""


TermWeight = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
"""A term's weight in a mark's story: the features are unit-normalised, so every weight lies in [0, 1]; anything else
(a hand-edited 1e308) would overflow the words model of every later view of the reader."""


class FeedbackEntry(BaseModel):
    """One of the exporting chat's feedback marks on a monitor: what generalises (outlets, terms), not which run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["more", "less", "fewer", "mute"]
    title: str = Field(default="", max_length=1000)
    outlets: list[str] = Field(default_factory=list, max_length=50)
    terms: dict[str, TermWeight] = Field(default_factory=dict, max_length=200)


class AlertEntry(BaseModel):
    """One of the exporting chat's alerts on a monitor (`/alert`): made again for the importing chat."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str = Field(min_length=1, max_length=500)
    condition: str = Field(min_length=1, max_length=MAX_CONDITION_CHARS)


class MonitorEntry(BaseModel):
    """One monitor in the JSON export: what `create_monitor` needs to make it again (no ids, no history)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str = Field(min_length=1, max_length=500)
    schedule: str = ""
    """In the /track grammar without a zone ("daily at 08:30"); empty for the default."""
    timezone: str | None = None
    """IANA name the schedule is read in; None: the importing chat's."""
    sources: list[str] = Field(default_factory=list, max_length=MAX_SOURCES_PER_MONITOR)
    """Source specs (`hn`, `rss:<url>`); empty for the default mix."""
    extra_queries: list[str] = Field(default_factory=list)
    include_keywords: list[str] = Field(default_factory=list)
    exclude_keywords: list[str] = Field(default_factory=list)
    lookback_hours: int | None = Field(default=None, ge=1)
    language: str | None = Field(default=None, max_length=16)
    quiet: bool = True
    """Nothing is sent when a run finds nothing new (the default, as `/quiet`); false: a short "nothing new" note."""
    paused: bool = False
    shared: bool = False
    delivery: DeliveryMode = DeliveryMode.AUTO
    """How the owner chat receives it: `auto` (in its briefing when it has one), `now` or `briefing`."""
    feedback: list[FeedbackEntry] = Field(default_factory=list, max_length=MAX_EXPORTED_MARKS)
    """The exporting chat's marks on the monitor (👍, 👎, fewer like this, muted outlets), applied to the importing
    chat's view of it."""
    rules: ReaderRules | None = None
    """The owner chat's own rules on its digests (`/filter`); absent in exports made before rules existed. A
    pattern RE2 refuses makes the entry refused, with the reason."""
    alerts: list[AlertEntry] = Field(default_factory=list, max_length=MAX_ALERTS_PER_CHAT)
    """The owner chat's alerts on it (`/alert`); absent when it has none."""

    def label(self) -> str:
        return f"“{self.topic}”"


class ReceivedEntry(BaseModel):
    """The exporting chat's alerts on a monitor it receives but does not own: on import they are the importing
    chat's again where that monitor is (same number and topic) and the chat receives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monitor_id: int = Field(ge=1)
    topic: str = Field(min_length=1, max_length=500)
    """The monitor's topic, so a monitor of the same number in another Lookout is not taken for it."""
    alerts: list[AlertEntry] = Field(min_length=1, max_length=MAX_ALERTS_PER_CHAT)

    def label(self) -> str:
        return f"monitor {monitor_name(self.monitor_id, self.topic, 'plain')}"


class _ExportFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: Literal["lookout.monitors"]
    version: Literal[1]
    monitors: list[Any] = Field(max_length=MAX_IMPORT_MONITORS * 10)
    received: list[Any] = Field(default_factory=list, max_length=MAX_IMPORT_MONITORS * 10)
    """Alerts on monitors the exporting chat received (`ReceivedEntry`); absent when it had none."""


@dataclass(frozen=True, kw_only=True)
class Refused:
    """An entry of the file that will not be created, and why (one sentence for the person)."""

    label: str
    """What it is, in the file's own words (plain text)."""
    reason: str
    """Lookout's sentence, in markdown (it may name a command as `code`)."""

    def line(self) -> str:
        """`label: reason` as markdown, the label escaped."""
        return f"{escape_markdown(self.label)}: {self.reason}"


def _bullets(heading: str, lines: list[str], limit: int) -> str:
    """`heading` over the first `limit` lines as a bullet list, the rest counted."""
    shown = [heading, *(f"- {line}" for line in lines[:limit])]
    if len(lines) > limit:
        shown.append(f"- … and {len(lines) - limit} more")
    return "\n".join(shown)


@dataclass(frozen=True, kw_only=True)
class ImportPlan:
    """What a file would create: the entries that passed every check, and those refused with their reasons."""

    kind: Literal["json", "opml"]
    entries: tuple[MonitorEntry, ...] = ()
    received: tuple[ReceivedEntry, ...] = ()
    """Alerts on monitors the exporting chat received, attached where those monitors are when created."""
    refused: tuple[Refused, ...] = ()
    problem: str | None = None
    """Set when the file as a whole cannot be read (nothing is created then)."""

    def describe(self, *, limit: int = 30) -> str:
        """Markdown listing what will be created and what was refused, for the confirmation; the file's own text
        (topics, folder and feed names, conditions) is escaped, so an `_` or `*` in it shows as written."""
        if self.problem:
            return self.problem
        parts: list[str] = []
        if self.entries:
            heading = f"**{len(self.entries)} monitor{'s' * (len(self.entries) != 1)} to create:**"
            parts.append(_bullets(heading, [_entry_line(entry) for entry in self.entries], limit))
        if self.received:
            count = sum(len(entry.alerts) for entry in self.received)
            heading = f"**{count} alert{'s' * (count != 1)} on monitors received, not owned:**"
            lines = [
                escape_markdown(f"{entry.label()}: " + "; ".join(f"when {alert.condition}" for alert in entry.alerts))
                for entry in self.received
            ]
            parts.append(_bullets(heading, lines, limit))
        if self.refused:
            heading = f"**Not imported ({len(self.refused)}):**"
            parts.append(_bullets(heading, [refused.line() for refused in self.refused], limit))
        return "\n\n".join(parts) or "The file holds no monitors."


@dataclass(frozen=True, kw_only=True)
class ExportedMonitors:
    """A chat's monitors as the two files of an export."""

    json: bytes
    opml: bytes | None
    """None when none of the monitors reads an `rss:` feed."""
    count: int
    feeds: int
    received: int = 0
    """Alerts on monitors the chat receives but does not own (held in the JSON)."""


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """What creating the planned monitors did."""

    created: list[tuple[int, str]] = field(default_factory=list)
    """(monitor id, topic) of each monitor made."""
    alerts: list[str] = field(default_factory=list)
    """Each alert attached to a monitor the chat receives (from the file's `received`)."""
    failed: list[Refused] = field(default_factory=list)


def _entry_line(entry: MonitorEntry) -> str:
    sources = ", ".join(entry.sources) if entry.sources else "the default mix"
    if len(sources) > 200:
        sources = f"{len(entry.sources)} sources"
    schedule = entry.schedule or f"{DEFAULT_SCHEDULE_TEXT} (the default)"
    named = (("paused", entry.paused), ("shared", entry.shared), ("notes when nothing is new", not entry.quiet))
    flags = "".join(f" · {flag}" for flag, on in named if on)
    if entry.rules is not None and not entry.rules.empty:
        flags += f" · your rules: {entry.rules.summary(80)}"
    if entry.alerts:
        flags += f" · {len(entry.alerts)} alert{'s' * (len(entry.alerts) != 1)}"
    return escape_markdown(f"“{entry.topic}” — {schedule} · {sources}{flags}")


# ---- export ----------------------------------------------------------------------------------------------


async def export_monitors(service: MonitorService, chat: ChatRecord, *, now: datetime) -> ExportedMonitors:
    """The monitors the chat owns, as JSON (every field `MonitorEntry` has) and OPML (their `rss:` feeds, one
    folder per monitor named after its topic); the JSON also holds the chat's alerts on monitors it only receives
    (`received`)."""
    subscriptions = SubscriptionRepository(service.database)
    records = await MonitorRepository(service.database).list_owned(chat.id)
    marks = FeedbackRepository(service.database)
    alerts = await AlertRepository(service.database).for_monitors([record.id for record in records], chat_id=chat.id)
    entries = []
    for record in records:
        subscription = await subscriptions.get(record.id, chat.id)
        entry = _entry_of(
            record,
            subscription.delivery if subscription else DeliveryMode.AUTO,
            await service.rules.stored(record.id, chat_id=chat.id),
        )
        feedback = [
            FeedbackEntry.model_validate(
                {"kind": m.kind, "title": m.title[:1000], "outlets": list(m.outlets)[:50], "terms": m.terms}
            )
            for m in (await marks.marks(record.id, chat.id))[-MAX_EXPORTED_MARKS:]
            if m.kind in ("more", "less", "fewer", "mute")
        ]
        mine = [AlertEntry(topic=alert.topic, condition=alert.condition) for alert in alerts.get(record.id, ())]
        entries.append(entry.model_copy(update={"feedback": feedback, "alerts": mine}))
    document: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": now.isoformat(timespec="seconds"),
        "monitors": [_exported(entry) for entry in entries],
    }
    received = await _received_alerts(service, chat.id, owned={record.id for record in records})
    if received:
        document["received"] = [entry.model_dump(mode="json") for entry in received]
    body = json.dumps(document, ensure_ascii=False, indent=2).encode() + b"\n"
    feeds = sum(1 for entry in entries for spec in entry.sources if spec.startswith("rss:"))
    opml = _opml(entries, title=f"Lookout monitors of {chat.title or chat.platform}", now=now) if feeds else None
    received_alerts = sum(len(entry.alerts) for entry in received)
    return ExportedMonitors(json=body, opml=opml, count=len(entries), feeds=feeds, received=received_alerts)


async def _received_alerts(service: MonitorService, chat_id: int, *, owned: set[int]) -> list[ReceivedEntry]:
    """The chat's alerts on monitors it receives but does not own, one entry per monitor."""
    mine: dict[int, list[AlertEntry]] = {}
    topics: dict[int, str] = {}
    for alert in await service.alerts.list(chat_id):
        if alert.monitor_id not in owned:
            mine.setdefault(alert.monitor_id, []).append(AlertEntry(topic=alert.topic, condition=alert.condition))
            topics[alert.monitor_id] = alert.monitor_topic
    return [ReceivedEntry(monitor_id=m, topic=topics[m][:500] or "?", alerts=alerts) for m, alerts in mine.items()]


def _exported(entry: MonitorEntry) -> dict[str, Any]:
    """An entry as the JSON file holds it: its rules only when it has some, and only the ones set; its feedback marks
    and its alerts only when it has some (files stay as they were before these existed)."""
    empty = {name for name in ("feedback", "alerts") if not getattr(entry, name)}
    document = entry.model_dump(mode="json", exclude={"rules", *empty})
    if entry.rules is not None and not entry.rules.empty:
        document["rules"] = entry.rules.stored()
    return document


def _entry_of(record: MonitorRecord, delivery: DeliveryMode, rules: ReaderRules | None = None) -> MonitorEntry:
    """The record's fields of the same name, with the schedule without its zone (the zone stands apart) and what
    the owner chat's subscription and rules add."""
    schedule = schedule_of(record)
    entry = MonitorEntry.model_validate(record, from_attributes=True)
    return entry.model_copy(
        update={"schedule": schedule.body_text(), "timezone": schedule.timezone, "delivery": delivery, "rules": rules}
    )


def _opml(entries: Sequence[MonitorEntry], *, title: str, now: datetime) -> bytes:
    root = ElementTree.Element("opml", version="2.0")
    head = ElementTree.SubElement(root, "head")
    ElementTree.SubElement(head, "title").text = title
    ElementTree.SubElement(head, "dateCreated").text = now.strftime("%a, %d %b %Y %H:%M:%S %z")
    body = ElementTree.SubElement(root, "body")
    for entry in entries:
        feeds = [spec.removeprefix("rss:") for spec in entry.sources if spec.startswith("rss:")]
        if not feeds:
            continue
        folder = ElementTree.SubElement(body, "outline", text=entry.topic, title=entry.topic)
        for url in feeds:
            name = urlsplit(url).hostname or url
            ElementTree.SubElement(folder, "outline", type="rss", text=name, title=name, xmlUrl=url)
    ElementTree.indent(root)
    written: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return written + b"\n"


# ---- import ----------------------------------------------------------------------------------------------


async def _attach_received(service: MonitorService, chat_id: int, entry: ReceivedEntry, result: ImportResult) -> None:
    """Make the entry's alerts the chat's on that monitor, when it is here (same number and topic) and the chat
    receives it; an alert the chat already has there is not made twice."""
    monitor = await MonitorRepository(service.database).get(entry.monitor_id)
    subscription = await SubscriptionRepository(service.database).get(entry.monitor_id, chat_id)
    reason = None
    if monitor is None or " ".join(monitor.topic.split()).casefold() != " ".join(entry.topic.split()).casefold():
        reason = "that monitor is not on this Lookout, so there is nothing to attach it to"
    elif subscription is None:
        how = f"`/subscribe {entry.monitor_id}`, then " if monitor.shared else ""
        reason = f"this chat does not receive that monitor; {how}`/alert {entry.monitor_id} when …` sets it again"
    have = {(a.monitor_id, a.condition.casefold()) for a in await service.alerts.list(chat_id)}
    for alert in entry.alerts:
        label = f"alert “{alert.condition}” on {entry.label()}"
        if reason is not None:
            result.failed.append(Refused(label=label, reason=reason))
            continue
        if (entry.monitor_id, " ".join(alert.condition.split()).casefold()) in have:
            continue
        try:
            await service.alerts.create(
                chat_id, monitor_id=entry.monitor_id, topic=alert.topic, condition=alert.condition
            )
        except ValueError as error:  # the chat has its most alerts already
            result.failed.append(Refused(label=label, reason=str(error)))
            continue
        result.alerts.append(label)


def read_monitor_file(content: bytes, *, topic: str | None = None) -> ImportPlan:
    """The monitors a file describes, checked for shape only (`plan_import` checks them against this Lookout).

    JSON: Lookout's own export. OPML (a feed reader's export, or Lookout's): each folder becomes a monitor whose
    topic is the folder's name and whose sources are its feeds; with `topic`, every feed of the file goes into
    one monitor on that topic. Feeds outside any folder need `topic` (a feed's title is no topic to search for).
    """
    if len(content) > MAX_IMPORT_BYTES:
        return ImportPlan(kind="json", problem=f"The file is over the {MAX_IMPORT_BYTES // 1_000_000} MB limit.")
    text = content.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return _read_json(text)
    if text.startswith(b"<") or text.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _read_opml(text, topic=topic)
    return ImportPlan(kind="json", problem="That is neither a Lookout JSON export nor an OPML file.")


def read_import_file(path: Path) -> bytes:
    """The bytes of a file to import, reading at most one byte past `MAX_IMPORT_BYTES` whatever the file system
    says its size is (a named pipe or a device reports 0). Raises `ValueError` (a sentence for the person) when the
    file is bigger, `OSError` when it cannot be read."""
    with path.open("rb") as stream:
        content = stream.read(MAX_IMPORT_BYTES + 1)
    if len(content) > MAX_IMPORT_BYTES:
        raise ValueError(f"{path.name} is over the {MAX_IMPORT_BYTES // 1_000_000} MB import limit.")
    return content


def _read_json(content: bytes) -> ImportPlan:
    try:
        document = _ExportFile.model_validate_json(content)
    except ValidationError as error:
        reason = "not valid JSON" if error.errors()[0]["type"] == "json_invalid" else _first_error(error)
        return ImportPlan(kind="json", problem=f"That JSON is not a Lookout monitors export ({reason}).")
    if len(document.monitors) > MAX_IMPORT_MONITORS:
        return ImportPlan(
            kind="json",
            problem=f"The file holds {len(document.monitors)} monitors; at most {MAX_IMPORT_MONITORS} per import.",
        )
    entries: list[MonitorEntry] = []
    refused: list[Refused] = []
    for number, raw in enumerate(document.monitors, start=1):
        label = f"#{number}" + (f" “{raw['topic']}”" if isinstance(raw, dict) and isinstance(raw.get("topic"), str)
                                else "")  # fmt: skip
        try:
            entries.append(MonitorEntry.model_validate(raw))
        except ValidationError as error:
            refused.append(Refused(label=label, reason=_first_error(error)))
    received: list[ReceivedEntry] = []
    for raw in document.received:
        try:
            received.append(ReceivedEntry.model_validate(raw))
        except ValidationError as error:
            refused.append(Refused(label="alerts on a received monitor", reason=_first_error(error)))
    return ImportPlan(kind="json", entries=tuple(entries), received=tuple(received), refused=tuple(refused))


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


_DECLARED_ENCODING = re.compile(rb"""^<\?xml[^>]*encoding=["']([A-Za-z0-9._-]+)["']""")


def _as_utf8(content: bytes) -> bytes:
    """The XML in UTF-8 (listparser reads UTF-8 only): decoded by its byte-order mark or declared encoding."""
    for mark, codec in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if content.startswith(mark):
            return content.decode(codec).encode()
    declared = _DECLARED_ENCODING.match(content.lstrip())
    codec = declared.group(1).decode() if declared else "utf-8"
    text = content.decode(codec)
    return re.sub(r"""^(\s*<\?xml[^>]*encoding=["'])[^"']+""", r"\1utf-8", text, count=1).encode()


def _read_opml(content: bytes, *, topic: str | None) -> ImportPlan:
    import listparser  # with lxml: loaded by the first OPML import, not by every process

    try:
        guard_xml(content, noun="file", max_bytes=MAX_IMPORT_BYTES)
    except SourceError as refusal:
        return ImportPlan(kind="opml", problem=f"That OPML file was refused: {refusal}.")
    try:
        parsed = listparser.parse(_as_utf8(content))
    except (UnicodeError, LookupError, ValueError) as error:
        reason = (
            "not UTF-8, and no other encoding declared" if isinstance(error, UnicodeError) else type(error).__name__
        )
        return ImportPlan(kind="opml", problem=f"That OPML file could not be read ({reason}).")
    if not parsed.get("version", "").startswith("opml") and not parsed.feeds:
        return ImportPlan(kind="opml", problem="That XML is not an OPML subscription list.")
    folders: dict[str, list[str]] = {}
    loose: list[tuple[str, str]] = []
    refused: list[Refused] = []
    for feed in parsed.feeds:
        url, title = str(feed.get("url") or ""), str(feed.get("title") or feed.get("url") or "")
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            refused.append(Refused(label=f"feed “{title[:80]}”", reason=f"its address {url[:80]!r} is not http(s)"))
            continue
        paths = [path for path in feed.get("categories", []) if path]
        if topic is not None:
            folders.setdefault(topic, []).append(url)
        elif paths:
            for path in paths:
                folders.setdefault(" ".join(str(path[-1]).split()), []).append(url)
        else:
            loose.append((title, url))
    for title, _url in loose:
        refused.append(
            Refused(
                label=f"feed “{title[:80]}”",
                reason="it is in no folder, and a folder's name is what a monitor watches the feeds for; import the "
                "file with a topic (`/import as <topic>`) to watch one topic across all its feeds",
            )
        )
    if len(folders) > MAX_IMPORT_MONITORS:
        return ImportPlan(
            kind="opml", problem=f"The file has {len(folders)} folders; at most {MAX_IMPORT_MONITORS} per import."
        )
    entries: list[MonitorEntry] = []
    for name, urls in folders.items():
        specs = list(dict.fromkeys(f"rss:{url}" for url in urls))
        if len(specs) > MAX_SOURCES_PER_MONITOR:
            reason = f"{len(specs)} feeds; a monitor searches at most {MAX_SOURCES_PER_MONITOR}"
            refused.append(Refused(label=f"folder “{name}”", reason=reason))
            continue
        try:
            entries.append(MonitorEntry(topic=name, sources=specs))
        except ValidationError as error:
            refused.append(Refused(label=f"folder “{name[:80]}”", reason=_first_error(error)))
    return ImportPlan(kind="opml", entries=tuple(entries), refused=tuple(refused))


async def plan_import(service: MonitorService, chat: ChatRecord, plan: ImportPlan) -> ImportPlan:
    """The plan with every entry checked as `create_monitor` would (topic, schedule, sources, window) and the ones
    this chat already has (same topic and sources) set aside, so importing a file twice creates nothing twice."""
    if plan.problem:
        return plan
    existing = {
        (record.topic.casefold(), tuple(record.sources))
        for record in await MonitorRepository(service.database).list_owned(chat.id)
    }
    entries: list[MonitorEntry] = []
    refused = list(plan.refused)
    for entry in plan.entries:
        try:
            fields = await service.check_fields(
                entry.topic,
                schedule_text=entry.schedule,
                timezone=entry.timezone or service.chat_timezone(chat),
                sources=entry.sources or None,
                extra_queries=entry.extra_queries,
                include_keywords=entry.include_keywords,
                exclude_keywords=entry.exclude_keywords,
                lookback_hours=entry.lookback_hours,
            )
        except (ScheduleError, ValueError) as error:
            refused.append(Refused(label=entry.label(), reason=str(error)))
            continue
        key = (fields.topic.casefold(), tuple(fields.sources))
        if key in existing:
            refused.append(Refused(label=entry.label(), reason="this chat already has that monitor"))
            continue
        existing.add(key)
        entries.append(entry)
    return ImportPlan(kind=plan.kind, entries=tuple(entries), received=plan.received, refused=tuple(refused))


async def create_imported(
    service: MonitorService,
    chat_id: int,
    entries: Sequence[MonitorEntry],
    received: Sequence[ReceivedEntry] = (),
) -> ImportResult:
    """Create the planned monitors for the chat, in order; one that fails now (e.g. a source switched off since the
    plan) is listed and the others are still created. Then the alerts on received monitors (`received`) are made
    the chat's where it receives that monitor; each one that cannot be is listed with why."""
    result = ImportResult()
    subscriptions = SubscriptionRepository(service.database)
    for entry in entries:
        try:
            view = await service.create_monitor(
                chat_id,
                entry.topic,
                schedule_text=entry.schedule,
                sources=entry.sources or None,
                timezone=entry.timezone,
                extra_queries=entry.extra_queries,
                include_keywords=entry.include_keywords,
                exclude_keywords=entry.exclude_keywords,
                lookback_hours=entry.lookback_hours,
                language=entry.language,
                quiet=entry.quiet,
                paused=entry.paused,
                shared=entry.shared,
            )
        except (ScheduleError, ValueError) as error:
            result.failed.append(Refused(label=entry.label(), reason=str(error)))
            continue
        if entry.delivery is not DeliveryMode.AUTO:
            await subscriptions.update(view.id, chat_id, delivery=entry.delivery)
        if entry.feedback:
            await FeedbackRepository(service.database).replace_marks(
                view.id,
                chat_id,
                [
                    FeedbackMarkRecord(monitor_id=view.id, chat_id=chat_id, kind=mark.kind, title=mark.title,
                                       outlets=tuple(mark.outlets), terms=dict(mark.terms))
                    for mark in entry.feedback
                ],
            )  # fmt: skip
            await service.feedback.give_vectors(view.id, chat_id)  # with an embedding model: meaning decides at once
        if entry.rules is not None:
            await service.rules.replace(view.id, chat_id=chat_id, rules=entry.rules)
        for alert in entry.alerts:
            try:
                await service.alerts.create(chat_id, monitor_id=view.id, topic=alert.topic, condition=alert.condition)
            except ValueError as error:  # the chat has its most alerts already: the monitor stands without it
                result.failed.append(Refused(label=f"alert “{alert.condition}” of {entry.label()}", reason=str(error)))
        result.created.append((view.id, view.topic))
    for received_entry in received:
        await _attach_received(service, chat_id, received_entry, result)
    logger.info("chat %d imported %d monitor(s), %d failed", chat_id, len(result.created), len(result.failed))
    return result
