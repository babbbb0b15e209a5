"""The chat agent's look-ups over what Lookout already collected for this chat: `search_history` (stored items by
words and dates) and `timeline` (items per day, with a chart). Tools with no slash command; stored items are fenced
off as untrusted data."""

from __future__ import annotations

import asyncio
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import ClassVar, Final
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field
from pydantic_ai import ModelRetry

from agent.commands.action import Arguments, Family, ToolContext
from agent.untrusted import untrusted_block
from kernel import Attachment
from research import export_stem
from sources import Item

__all__ = ["ACTIONS", "SearchHistory", "Timeline", "TimelineArguments"]

HISTORY_LIMIT: Final = 20
"""The most stored items `search_history` hands the model."""
CHART_ITEMS: Final = 5000
"""The most stored items the timeline's chart is drawn from (the counts are exact whatever the number)."""
DAYS_LIMIT: Final = 365
"""The longest window `timeline` counts over."""


class SearchHistory(Arguments):
    """The chat tool `search_history`."""

    name: ClassVar[str] = "search_history"
    text: str = Field(description="Words that must all appear.")
    since: date | None = Field(default=None, description="First day, YYYY-MM-DD; empty: no start.")
    until: date | None = Field(default=None, description="Last day, YYYY-MM-DD; empty: today.")
    limit: int = Field(default=10, description="Items, 1-20.")


class TimelineArguments(Arguments):
    """The chat tool `timeline`."""

    name: ClassVar[str] = "timeline"
    topic: str = Field(description="Words that must all appear.")
    days: int = Field(default=30, description="Window, 1-365.")


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


def _local_midnight(day: date, timezone: str) -> datetime:
    return datetime.combine(day, time(0, 0), tzinfo=ZoneInfo(timezone))


def _draw(items: list[Item], path: Path, title: str, since: datetime, until: datetime, zone: ZoneInfo) -> None:
    from research import write_volume_chart

    write_volume_chart(items, path=path, title=title, since=since, until=until, timezone=zone)


ACTIONS = Family()
"""The history family: tools only."""


@ACTIONS.tool(name="search_history", description="Search items stored earlier for this chat by words and dates.")
async def _search_history(context: ToolContext, command: SearchHistory) -> str:
    """Search the items stored for this chat, for the chat agent."""
    words = " ".join(command.text.split())
    if not words:
        raise ModelRetry("Give the words to look for.")
    since, until = command.since, command.until
    if since and until and until < since:
        raise ModelRetry("`until` is before `since`; swap them.")
    records = await context.services.items.search(
        words,
        since=_local_midnight(since, context.timezone) if since else None,
        until=_local_midnight(until + timedelta(days=1), context.timezone) if until else None,
        limit=min(max(command.limit, 1), HISTORY_LIMIT),
        chat_id=context.chat_id,
    )
    if not records:
        return f"No stored items mention “{words}” in that window."
    context.read_untrusted = True
    zone = ZoneInfo(context.timezone)
    lines = []
    for number, record in enumerate(records, start=1):
        when = (record.published or record.collected_at).astimezone(zone)
        lines.append(f"{number}. [{record.source}] {' '.join(record.title.split())}\n   {record.url} ({when:%Y-%m-%d})")
    return f"{len(records)} stored items for “{words}”, newest first:\n" + untrusted_block(
        f"stored items for {words}", "\n".join(lines)
    )


@ACTIONS.tool(
    name="timeline", description='Items per day about a topic stored for this chat, with a chart ("trend of X").'
)
async def _timeline(context: ToolContext, command: TimelineArguments) -> Timeline:
    """Items per day about a topic stored for this chat, with a chart, for the chat agent."""
    words = " ".join(command.topic.split())
    if not words:
        raise ModelRetry("Give the topic words.")
    window = min(max(command.days, 1), DAYS_LIMIT)
    until = context.now
    since = until - timedelta(days=window)
    zone = ZoneInfo(context.timezone)
    repository = context.services.items
    counts = await repository.count_by_day(words, since=since, until=until, tz=zone, chat_id=context.chat_id)
    chart = False
    if counts:
        records = await repository.search(words, since=since, until=until, limit=CHART_ITEMS, chat_id=context.chat_id)
        path = context.exports_dir / f"{export_stem(words, until, f'timeline-{window}d')}.png"
        from monitors import item_of_record  # the run machinery loads with the first chart, not with the catalogue

        # The chart counts by publication date; undated items are placed on the day they were collected, the way
        # `count_by_day` counts them, so both agree.
        items = [
            item.model_copy(update={"published": item.published or item.collected_at})
            for item in map(item_of_record, records)
            if item is not None
        ]
        await asyncio.to_thread(_draw, items, path, words, since, until, zone)
        context.attach(
            Attachment(
                path=path, filename=path.name, kind="image", caption=f"“{words[:100]}” over the last {window} days"
            )
        )
        chart = True
    busiest = max(counts.items(), key=lambda pair: pair[1])[0].isoformat() if counts else None
    return Timeline(
        topic=words,
        days=window,
        timezone=context.timezone,
        total=sum(counts.values()),
        per_day={day.isoformat(): count for day, count in counts.items()},
        busiest_day=busiest,
        chart_attached=chart,
    )
