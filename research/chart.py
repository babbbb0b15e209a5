"""Draw the volume chart of a run: items per day per source over the lookback window, as a PNG."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path

from sources import Item

SENTIMENT_COLOURS = {
    "positive": "#2ca02c",
    "neutral": "#9e9e9e",
    "mixed": "#ff7f0e",
    "negative": "#d62728",
    "unknown": "#d9d9d9",
}
"""Fixed colours when bars are split by tone, so green always reads as positive."""

MAX_SERIES = 9
"""Sources beyond the busiest ones are drawn together as "other", so colours and the legend stay readable."""
_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei", "Droid Sans Fallback")
"""Used for titles in Chinese/Japanese/Korean when installed; DejaVu Sans has no such glyphs."""


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def daily_counts(
    items: Iterable[Item],
    *,
    since: datetime,
    until: datetime,
    timezone: tzinfo = UTC,
    series: Mapping[str, str] | None = None,
) -> tuple[list[date], dict[str, list[int]], int]:
    """Days of the window, items per day per source (busiest source first), and how many items had no date."""
    start, end = _aware(since).astimezone(timezone), _aware(until).astimezone(timezone)
    days = [start.date() + timedelta(days=offset) for offset in range(max((end.date() - start.date()).days, 0) + 1)]
    index = {day: position for position, day in enumerate(days)}
    per_source: dict[str, list[int]] = {}
    undated = 0
    for item in items:
        if item.published is None:
            undated += 1
            continue
        if not start <= item.published <= end:
            continue
        position = index.get(item.published.astimezone(timezone).date())
        if position is not None:
            name = series.get(item.id, "unknown") if series is not None else item.source
            per_source.setdefault(name, [0] * len(days))[position] += 1
    totals = Counter({source: sum(counts) for source, counts in per_source.items()})
    ordered = {source: per_source[source] for source, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))}
    if len(ordered) > MAX_SERIES:
        names = list(ordered)
        kept = {name: ordered[name] for name in names[: MAX_SERIES - 1]}
        rest = [ordered[name] for name in names[MAX_SERIES - 1 :]]
        kept["other"] = [sum(values) for values in zip(*rest, strict=True)]
        ordered = kept
    return days, ordered, undated


def _font_family() -> list[str]:
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(name for name in _CJK_FONTS if name in installed)]


def write_volume_chart(
    items: Iterable[Item],
    *,
    path: Path,
    title: str,
    since: datetime,
    until: datetime,
    timezone: tzinfo = UTC,
    series: Mapping[str, str] | None = None,
) -> Path:
    """Write a stacked bar chart of items per day per source to `path` (PNG) and return the path.

    Days are counted in `timezone` (the monitor's). Items without a date are not drawn but counted in the
    subtitle. An empty window gives a chart that says so. With `series` (a sentiment label per item id), the
    bars are split by tone instead of by source, in fixed colours.
    """
    # Imported here, and drawn on an Agg canvas of its own: no global backend is chosen, and importing the
    # package does not pay for matplotlib.
    from matplotlib import dates as mdates
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    days, per_source, undated = daily_counts(items, since=since, until=until, timezone=timezone, series=series)
    if series is not None:  # tones in a fixed order (positive at the bottom), each in its own colour
        per_source = {name: per_source[name] for name in SENTIMENT_COLOURS if name in per_source}
    total = sum(sum(counts) for counts in per_source.values())
    family = _font_family()

    figure = Figure(figsize=(10, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    # Bars centred on midnight, where the date ticks sit, so each day's label is under its bar.
    midnights = [datetime(d.year, d.month, d.day) for d in days]
    positions = [float(n) for n in mdates.date2num(midnights)]  # type: ignore[no-untyped-call]
    bottoms = [0] * len(days)
    palette = [f"C{n}" for n in range(10)]
    for number, (source, counts) in enumerate(per_source.items()):
        colour = SENTIMENT_COLOURS.get(source, "C0") if series is not None else palette[number % len(palette)]
        axes.bar(positions, counts, width=0.8, bottom=bottoms, label=source, color=colour)
        bottoms = [b + c for b, c in zip(bottoms, counts, strict=True)]

    if len(days) <= 14:
        # One tick per day: the automatic locator would tick hours on a short window, and bars are days.
        axes.xaxis.set_major_locator(mdates.DayLocator())  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))  # type: ignore[no-untyped-call]
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=12)  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.set_xlim(positions[0] - 0.6, positions[-1] + 0.6)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("items per day", fontfamily=family)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    if total:
        handles, labels = axes.get_legend_handles_labels()
        # Reversed, so the legend reads top to bottom like the stack; outside the plot, so it hides no bar.
        legend_title = "tone" if series is not None else "source"
        axes.legend(handles[::-1], labels[::-1], title=legend_title, loc="upper left", bbox_to_anchor=(1.01, 1),
                    frameon=False)  # fmt: skip
    else:
        axes.set_ylim(0, 1)
        axes.text(0.5, 0.5, "No items in this window", transform=axes.transAxes, ha="center", va="center",
                  fontsize=14, color="0.4", fontfamily=family)  # fmt: skip

    zone = getattr(timezone, "key", None) or timezone.tzname(None) or "UTC"
    span = f"{days[0]:%d %b %Y}" if len(days) == 1 else f"{days[0]:%d %b %Y} – {days[-1]:%d %b %Y}"
    subtitle = f"{total} item{'s' * (total != 1)} · {span} ({zone})"
    if undated:
        subtitle += f" · {undated} without a date not shown"
    figure.suptitle(title, fontsize=14, fontweight="bold", fontfamily=family)
    axes.set_title(subtitle, fontsize=10, color="0.35", fontfamily=family)

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # A title in a script no installed font covers draws boxes; that is not worth a warning per run.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        figure.savefig(path, format="png")
    return path
