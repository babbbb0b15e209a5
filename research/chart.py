"""Draw the volume chart of a run: items per hour, day or week per source over the window, as a PNG.

Buckets come from the window, so every chart has enough bars to show a trend (hours for a day, days for a
week or a month, weeks beyond). Titles in Chinese, Japanese or Korean draw with Noto Sans CJK, which ships
with Lookout (the `noto-cjk-sans-otc` package, SIL Open Font License) wherever it runs; a system CJK font is
used when the package is missing, and if neither is there the log says once what to install.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sources import Item

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

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
HOURLY_UP_TO = timedelta(hours=72)
"""Windows up to three days are counted per hour (24 to 72 bars)."""
DAILY_UP_TO = timedelta(days=120)
"""Windows up to four months are counted per day; longer ones per week (Monday first)."""
BASE_FONT = "DejaVu Sans"
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", "Source Han Sans SC", "WenQuanYi Zen Hei")
"""Tried in this order after the base font for characters it lacks (matplotlib's per-glyph font fallback)."""
CJK_FONT_HINT = (
    "charts cannot draw Chinese, Japanese or Korean text: no CJK font found. Reinstall Lookout's dependencies "
    "(`uv sync`, which brings the noto-cjk-sans-otc package) or install a system font (Debian: fonts-noto-cjk)"
)

Unit = Literal["hour", "day", "week"]
_STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}


@dataclass(frozen=True)
class VolumeCounts:
    """Items per bucket per source over a window."""

    unit: Unit
    starts: list[datetime]
    """Each bucket's start, in the chart's timezone, oldest first."""
    per_source: dict[str, list[int]]
    """Source → count per bucket, busiest source first (the rest folded into "other")."""
    undated: int
    """Items without a date (not drawn)."""


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def bucket_unit(since: datetime, until: datetime) -> Unit:
    """Hours for a window of up to three days, days up to four months, weeks beyond."""
    span = _aware(until) - _aware(since)
    return "hour" if span <= HOURLY_UP_TO else "day" if span <= DAILY_UP_TO else "week"


def _bucket_start(moment: datetime, unit: Unit) -> datetime:
    if unit == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=midnight.weekday()) if unit == "week" else midnight


def volume_counts(
    items: Iterable[Item],
    *,
    since: datetime,
    until: datetime,
    timezone: tzinfo = UTC,
    series: Mapping[str, str] | None = None,
) -> VolumeCounts:
    """Count the items of the window per bucket (hour, day or week, chosen from the window) and source, with
    buckets cut in `timezone` (the monitor's), so "a day" is the reader's day. With `series` (a name per item
    id, e.g. its tone), items are counted per series name instead of per source."""
    start, end = _aware(since).astimezone(timezone), _aware(until).astimezone(timezone)
    unit = bucket_unit(start, end)
    first, last = _bucket_start(start, unit), _bucket_start(end, unit)
    starts: list[datetime] = []
    current = first
    while current <= last:
        starts.append(current)
        # Wall-clock steps (a day is a calendar day across a DST change), then normalised back into the zone.
        current = (current.replace(tzinfo=None) + _STEP[unit]).replace(tzinfo=timezone)
        current = _bucket_start(current.astimezone(UTC).astimezone(timezone), unit)
    index = {moment.replace(tzinfo=None): position for position, moment in enumerate(starts)}
    per_source: dict[str, list[int]] = {}
    undated = 0
    for item in items:
        if item.published is None:
            undated += 1
            continue
        if not start <= item.published <= end:
            continue
        key = _bucket_start(item.published.astimezone(timezone), unit).replace(tzinfo=None)
        position = index.get(key)
        if position is not None:
            name = series.get(item.id, "unknown") if series is not None else item.source
            per_source.setdefault(name, [0] * len(starts))[position] += 1
    totals = Counter({source: sum(counts) for source, counts in per_source.items()})
    ordered = {source: per_source[source] for source, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))}
    if len(ordered) > MAX_SERIES:
        names = list(ordered)
        kept = {name: ordered[name] for name in names[: MAX_SERIES - 1]}
        rest = [ordered[name] for name in names[MAX_SERIES - 1 :]]
        kept["other"] = [sum(values) for values in zip(*rest, strict=True)]
        ordered = kept
    return VolumeCounts(unit=unit, starts=starts, per_source=ordered, undated=undated)


@functools.cache
def font_family() -> tuple[str, ...]:
    """The base font, then the CJK fonts matplotlib can use for glyphs the base lacks (registered once)."""
    from matplotlib import font_manager

    # The font has one weight; bold titles fall back to it per glyph, which matplotlib logs every time.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    try:
        from noto_cjk_sans_otc import FONT_PATH

        font_manager.fontManager.addfont(str(FONT_PATH))
    except (ImportError, OSError, RuntimeError) as error:  # a broken or missing package: system fonts may do
        logger.info("the packaged CJK font could not be loaded (%s); looking for a system one", error)
    installed = {font.name for font in font_manager.fontManager.ttflist}
    cjk = tuple(name for name in CJK_FONTS if name in installed)
    if not cjk:
        logger.warning(CJK_FONT_HINT)
    return (BASE_FONT, *cjk)


def _axis_format(axes: object, unit: Unit, buckets: int) -> None:
    from matplotlib import dates as mdates

    xaxis = axes.xaxis  # type: ignore[attr-defined]
    if unit == "day" and buckets <= 14:
        # One tick per day: the automatic locator would tick hours on a short window, and bars are days.
        xaxis.set_major_locator(mdates.DayLocator())  # type: ignore[no-untyped-call]
        xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))  # type: ignore[no-untyped-call]
        return
    locator = mdates.AutoDateLocator(minticks=3, maxticks=12)  # type: ignore[no-untyped-call]
    xaxis.set_major_locator(locator)
    xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]


def write_volume_chart(
    items: Iterable[Item],
    *,
    path: Path,
    title: str,
    since: datetime,
    until: datetime,
    timezone: tzinfo = UTC,
    series: Mapping[str, str] | None = None,
    series_title: str = "tone",
) -> Path:
    """Write a stacked bar chart of items per bucket per source to `path` (PNG) and return the path.

    Buckets are hours, days or weeks (`bucket_unit`) counted in `timezone` (the monitor's). Items without a
    date are not drawn but counted in the subtitle. An empty window gives a chart that says so. With `series` (a
    name per item id), the bars are split by that name instead of by source, and the legend is titled
    `series_title`: a sentiment label per item (`"tone"`, the default) draws tones in fixed colours; any other
    split (a briefing's topics) in the usual palette.
    """
    # Imported here, and drawn on an Agg canvas of its own: no global backend is chosen, and importing the
    # package does not pay for matplotlib.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = volume_counts(items, since=since, until=until, timezone=timezone, series=series)
    by_tone = series is not None and series_title == "tone"
    if by_tone:  # tones in a fixed order (positive at the bottom), each in its own colour
        counts = replace(
            counts, per_source={n: counts.per_source[n] for n in SENTIMENT_COLOURS if n in counts.per_source}
        )
    total = sum(sum(values) for values in counts.per_source.values())
    family = list(font_family())

    figure = Figure(figsize=(10, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    _draw_bars(axes, counts, by_tone=by_tone)
    _draw_axes(axes, counts, total=total, family=family, legend_title=series_title if series is not None else "source")
    figure.suptitle(title, fontsize=14, fontweight="bold", fontfamily=family)
    axes.set_title(_subtitle(counts, total=total, timezone=timezone), fontsize=10, color="0.35", fontfamily=family)
    _save(figure, path)
    return path


def _bar_centres(counts: VolumeCounts) -> tuple[list[float], float]:
    """Where each bucket's bar is centred on the date axis, and a bucket's width (in days, matplotlib's unit)."""
    from matplotlib import dates as mdates

    # Matplotlib's date numbers are naive wall-clock times here: bars sit where the reader's clock says.
    positions = [float(n) for n in mdates.date2num([s.replace(tzinfo=None) for s in counts.starts])]  # type: ignore[no-untyped-call]
    step = _STEP[counts.unit] / timedelta(days=1)
    # Day and week bars are centred on their date's tick; hour bars start at their hour.
    offset = 0.0 if counts.unit != "hour" else step / 2
    return [position + offset for position in positions], step


def _draw_bars(axes: Axes, counts: VolumeCounts, *, by_tone: bool) -> None:
    """Stack one series of bars per source (or tone) on `axes`."""
    from matplotlib.collections import PolyCollection

    centres, step = _bar_centres(counts)
    bottoms = [0] * len(centres)
    palette = [f"C{n}" for n in range(10)]
    half = step * 0.4
    for number, (source, values) in enumerate(counts.per_source.items()):
        colour = SENTIMENT_COLOURS.get(source, "C0") if by_tone else palette[number % len(palette)]
        # One polygon collection per series rather than `axes.bar`'s one patch per bar: the same picture, at a
        # fraction of the CPU (each patch is an artist of its own, laid out and drawn one by one).
        boxes = [
            [(centre - half, bottom), (centre - half, bottom + value), (centre + half, bottom + value),
             (centre + half, bottom)]
            for centre, bottom, value in zip(centres, bottoms, values, strict=True)
            if value
        ]  # fmt: skip
        bars = PolyCollection(boxes, facecolors=colour, edgecolors="none", linewidths=0, label=source)
        bars.sticky_edges.y.append(0)  # as bars: the value axis starts at zero, with no margin below
        axes.add_collection(bars)
        bottoms = [b + c for b, c in zip(bottoms, values, strict=True)]
    axes.autoscale_view()


def _draw_axes(axes: Axes, counts: VolumeCounts, *, total: int, family: list[str], legend_title: str | None) -> None:
    """The axes' ticks, label, grid and legend (titled `legend_title`), or a note that the window is
    empty."""
    from matplotlib.ticker import MaxNLocator

    centres, step = _bar_centres(counts)
    _axis_format(axes, counts.unit, len(centres))
    axes.set_xlim(centres[0] - step * 0.6, centres[-1] + step * 0.6)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel(f"items per {counts.unit}", fontfamily=family)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    if total:
        handles, labels = axes.get_legend_handles_labels()
        # Reversed, so the legend reads top to bottom like the stack; outside the plot, so it hides no bar.
        axes.legend(handles[::-1], labels[::-1], title=legend_title, loc="upper left",
                    bbox_to_anchor=(1.01, 1), frameon=False, prop={"family": family})  # fmt: skip
    else:
        axes.set_ylim(0, 1)
        axes.text(0.5, 0.5, "No items in this window", transform=axes.transAxes, ha="center", va="center",
                  fontsize=14, color="0.4", fontfamily=family)  # fmt: skip


def _subtitle(counts: VolumeCounts, *, total: int, timezone: tzinfo) -> str:
    """How many items the chart shows, over which span in which zone, and how many it could not place."""
    zone = getattr(timezone, "key", None) or timezone.tzname(None) or "UTC"
    first, last = counts.starts[0], counts.starts[-1] + _STEP[counts.unit] - timedelta(minutes=1)
    fmt = "%d %b %Y %H:%M" if counts.unit == "hour" else "%d %b %Y"
    span = f"{first:{fmt}}" if f"{first:{fmt}}" == f"{last:{fmt}}" else f"{first:{fmt}} – {last:{fmt}}"
    subtitle = f"{total} item{'s' * (total != 1)} · {span} ({zone})"
    if counts.undated:
        subtitle += f" · {counts.undated} without a date not shown"
    return subtitle


def _save(figure: Figure, path: Path) -> None:
    """Lay the figure out once and write it as a PNG, warning when its fonts lack a script it uses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The layout is worked out once, then switched off: savefig with a layout engine set draws the whole
        # figure twice (once without rendering, for the layout), which was a third of a chart's CPU.
        engine = figure.get_layout_engine()
        assert engine is not None
        engine.execute(figure)
        figure.set_layout_engine(None)
        figure.savefig(path, format="png")
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    if missing:  # the fonts above lack a script used in the title: say so (once per chart), never silently
        logger.warning("chart %s: %s", path.name, missing[0])
