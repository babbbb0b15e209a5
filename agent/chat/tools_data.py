"""Chat-agent tools over what Lookout already collected: search it, count it per day (with a chart), export a
monitor's items as CSV."""

from __future__ import annotations

import asyncio
from datetime import date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext

from agent.chat.deps import ChatDeps
from agent.chat.instructions import untrusted_block
from agent.messages import Attachment
from monitors import MonitorNotFoundError
from research import export_stem, write_stored_items_csv
from sources import Engagement, Item
from storage import ItemRecord, ItemRepository

__all__ = ["Timeline", "export_items", "search_history", "timeline"]

HISTORY_LIMIT = 20
CHART_ITEMS = 5000


def _local_midnight(day: date, timezone: str) -> datetime:
    return datetime.combine(day, time(0, 0), tzinfo=ZoneInfo(timezone))


async def search_history(
    ctx: RunContext[ChatDeps], text: str, since: date | None = None, until: date | None = None, limit: int = 10
) -> str:
    """Search items stored earlier for this chat by words and dates.

    Args:
        text: Words that must all appear.
        since: First day, YYYY-MM-DD; empty: no start.
        until: Last day, YYYY-MM-DD; empty: today.
        limit: Items, 1-20.
    """
    deps = ctx.deps
    words = " ".join(text.split())
    if not words:
        raise ModelRetry("Give the words to look for.")
    if since and until and until < since:
        raise ModelRetry("`until` is before `since`; swap them.")
    records = await ItemRepository(deps.services.database).search(
        words,
        since=_local_midnight(since, deps.timezone) if since else None,
        until=_local_midnight(until + timedelta(days=1), deps.timezone) if until else None,
        limit=min(max(limit, 1), HISTORY_LIMIT),
        chat_id=deps.chat_id,
    )
    if not records:
        return f"No stored items mention “{words}” in that window."
    deps.read_untrusted = True
    zone = ZoneInfo(deps.timezone)
    lines = []
    for number, record in enumerate(records, start=1):
        when = (record.published or record.collected_at).astimezone(zone)
        lines.append(f"{number}. [{record.source}] {' '.join(record.title.split())}\n   {record.url} ({when:%Y-%m-%d})")
    return f"{len(records)} stored items for “{words}”, newest first:\n" + untrusted_block(
        f"stored items for {words}", "\n".join(lines)
    )


class Timeline(BaseModel):
    """How many stored items matched a topic on each day (the chart is attached to the reply)."""

    topic: str
    days: int
    timezone: str
    total: int
    per_day: dict[str, int]
    """`YYYY-MM-DD` → count, only days with items."""
    busiest_day: str | None
    chart_attached: bool


def _as_item(record: ItemRecord) -> Item:
    # The chart counts by publication date; undated items are placed on the day they were collected, the way
    # `count_by_day` counts them, so both agree.
    return Item(
        id=record.id,
        source=record.source,
        url=record.url,
        title=record.title,
        published=record.published or record.collected_at,
        engagement=Engagement(),
        collected_at=record.collected_at,
    )


async def timeline(ctx: RunContext[ChatDeps], topic: str, days: int = 30) -> Timeline:
    """Items per day about a topic stored for this chat, with a chart ("trend of X").

    Args:
        topic: Words that must all appear.
        days: Window, 1-365.
    """
    deps = ctx.deps
    words = " ".join(topic.split())
    if not words:
        raise ModelRetry("Give the topic words.")
    window = min(max(days, 1), 365)
    until = deps.now
    since = until - timedelta(days=window)
    zone = ZoneInfo(deps.timezone)
    repository = ItemRepository(deps.services.database)
    counts = await repository.count_by_day(words, since=since, until=until, tz=zone, chat_id=deps.chat_id)
    chart = False
    if counts:
        records = await repository.search(words, since=since, until=until, limit=CHART_ITEMS, chat_id=deps.chat_id)
        path = deps.exports_dir / f"{export_stem(words, until, f'timeline-{window}d')}.png"
        await asyncio.to_thread(_draw, [_as_item(r) for r in records], path, words, since, until, zone)
        deps.attach(
            Attachment(
                path=path, filename=path.name, kind="image", caption=f"“{words[:100]}” over the last {window} days"
            )
        )
        chart = True
    total = sum(counts.values())
    busiest = max(counts.items(), key=lambda pair: pair[1])[0].isoformat() if counts else None
    return Timeline(
        topic=words,
        days=window,
        timezone=deps.timezone,
        total=total,
        per_day={day.isoformat(): count for day, count in counts.items()},
        busiest_day=busiest,
        chart_attached=chart,
    )


def _draw(items: list[Item], path: Path, title: str, since: datetime, until: datetime, zone: ZoneInfo) -> None:
    from research import write_volume_chart

    write_volume_chart(items, path=path, title=title, since=since, until=until, timezone=zone)


async def export_items(ctx: RunContext[ChatDeps], monitor_id: int, days: int = 30) -> str:
    """Attach a CSV of what a monitor collected in the last `days` days.

    Args:
        monitor_id: See list_monitors.
        days: Window, 1-365.
    """
    deps = ctx.deps
    try:
        view = await deps.services.monitors.get_monitor(monitor_id, chat_id=deps.chat_id, is_admin=deps.turn.is_admin)
    except MonitorNotFoundError:
        raise ModelRetry(f"This chat has no monitor #{monitor_id}; call list_monitors for the ids.") from None
    window = min(max(days, 1), 365)
    scored = await ItemRepository(deps.services.database).for_monitor(view.id, since=deps.now - timedelta(days=window))
    if not scored:
        return f"Monitor #{view.id} “{view.topic}” collected nothing in the last {window} days, so there is no CSV."
    # The same file as /export writes: one layout, one name (`deepseek-20261122-0830-m1-last-30d.csv`).
    path = deps.exports_dir / f"{export_stem(view.topic, deps.now, f'm{view.id}-last-{window}d')}.csv"
    try:
        await asyncio.to_thread(write_stored_items_csv, path, scored)
    except OSError as error:
        return f"The CSV could not be written: {error.strerror or error}."
    deps.attach(
        Attachment(path=path, filename=path.name, caption=f"#{view.id} {view.topic[:100]}: {len(scored)} items")
    )
    return (
        f"Exported {len(scored)} items of monitor #{view.id} “{view.topic}” from the last {window} days; the CSV "
        f"({path.name}) is attached to your reply automatically."
    )
