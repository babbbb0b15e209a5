"""The volume chart: counts per day per source, and a real PNG for a busy window and for an empty one."""

from __future__ import annotations

import struct
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from research.chart import MAX_SERIES, VolumeCounts, bucket_unit, font_family, volume_counts, write_volume_chart
from sources.base import Item


def daily_counts(items: list[Item], **window: object) -> tuple[list[date], dict[str, list[int]], int]:
    counts: VolumeCounts = volume_counts(items, **window)  # type: ignore[arg-type]
    assert counts.unit == "day"
    return [start.date() for start in counts.starts], counts.per_source, counts.undated


UNTIL = datetime(2026, 11, 20, 12, tzinfo=UTC)
SINCE = UNTIL - timedelta(days=7)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def item(source: str, key: int, published: datetime | None) -> Item:
    return Item(id=f"{source}:{key}", source=source, url=f"https://example.com/{source}/{key}", title=f"story {key}",
                published=published)  # fmt: skip


def week_of_items() -> list[Item]:
    items = []
    for day in range(7):
        for n in range(day + 1):
            items.append(item("news", day * 10 + n, UNTIL - timedelta(days=day, hours=1)))
        items.append(item("hn", 100 + day, UNTIL - timedelta(days=day, hours=2)))
    items.append(item("rss", 999, None))
    items.append(item("rss", 998, SINCE - timedelta(days=3)))  # before the window
    return items


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC, "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def has_colour(path: Path, rgb: tuple[int, int, int]) -> bool:
    """Whether any pixel has this colour (the chart's first series is matplotlib's C0 blue)."""
    from matplotlib import image

    pixels = image.imread(str(path))
    target = [channel / 255 for channel in rgb]
    return bool((abs(pixels[:, :, :3] - target) < 0.01).all(axis=2).any())


def test_counts_per_day_per_source_in_the_monitors_timezone() -> None:
    days, per_source, undated = daily_counts(week_of_items(), since=SINCE, until=UNTIL)
    assert days == [date(2026, 11, 13) + timedelta(days=n) for n in range(8)]
    assert list(per_source) == ["news", "hn"], "busiest source first"
    assert per_source["news"] == [0, 7, 6, 5, 4, 3, 2, 1]
    assert per_source["hn"] == [0, 1, 1, 1, 1, 1, 1, 1]
    assert undated == 1

    late = [item("news", 1, datetime(2026, 11, 19, 23, 30, tzinfo=UTC))]
    local_days, shanghai, _ = daily_counts(late, since=SINCE, until=UNTIL, timezone=ZoneInfo("Asia/Shanghai"))
    assert local_days[shanghai["news"].index(1)] == date(2026, 11, 20), "23:30 UTC is the next morning there"


def test_many_sources_fold_into_other() -> None:
    items = [item(f"s{n:02d}", k, UNTIL - timedelta(hours=1)) for n in range(12) for k in range(12 - n)]
    _, per_source, _ = daily_counts(items, since=SINCE, until=UNTIL)
    assert len(per_source) == MAX_SERIES and list(per_source)[-1] == "other"
    assert sum(sum(counts) for counts in per_source.values()) == len(items)


def test_chart_is_a_png_with_the_bars_drawn(tmp_path: Path) -> None:
    path = write_volume_chart(
        week_of_items(), path=tmp_path / "run" / "volume.png", title="DeepSeek — items per day",
        since=SINCE, until=UNTIL,
    )  # fmt: skip

    assert path == tmp_path / "run" / "volume.png"
    data = path.read_bytes()
    assert png_size(data) == (1100, 550)
    assert 10_000 < len(data) < 500_000
    assert has_colour(path, (0x1F, 0x77, 0xB4)), "the first source's bars are drawn"


def test_an_empty_window_gives_a_chart_not_a_crash(tmp_path: Path) -> None:
    path = write_volume_chart(
        [], path=tmp_path / "empty.png", title="DeepSeek 价格", since=SINCE, until=UNTIL,
        timezone=ZoneInfo("Europe/Berlin"),
    )  # fmt: skip

    data = path.read_bytes()
    assert png_size(data) == (1100, 550) and len(data) > 5_000
    assert not has_colour(path, (0x1F, 0x77, 0xB4)), "no bars"


def test_a_one_day_window(tmp_path: Path) -> None:
    items = [item("news", 1, UNTIL - timedelta(hours=1))]
    path = write_volume_chart(
        items, path=tmp_path / "day.png", title="t", since=UNTIL - timedelta(hours=5), until=UNTIL
    )
    assert png_size(path.read_bytes()) == (1100, 550)


def test_drawing_selects_no_global_backend(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from datetime import UTC, datetime, timedelta\n"
        "from pathlib import Path\n"
        "import research\n"
        "assert 'matplotlib' not in sys.modules, 'importing the package must not import matplotlib'\n"
        "from research.chart import write_volume_chart\n"
        "now = datetime(2026, 11, 20, tzinfo=UTC)\n"
        f"write_volume_chart([], path=Path({str(tmp_path / 'x.png')!r}), title='t', since=now - timedelta(days=2),"
        " until=now)\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot (and its global backend) was not used'\n"
    )
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=root)
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "x.png").read_bytes()[:8] == PNG_MAGIC


def test_buckets_follow_the_window_so_a_daily_chart_has_a_trend() -> None:
    """#9.24: a daily monitor's 24-hour window was one bar; now hours for a day, days for a week or a month."""
    assert bucket_unit(UNTIL - timedelta(hours=24), UNTIL) == "hour"
    assert bucket_unit(UNTIL - timedelta(days=7), UNTIL) == "day"
    assert bucket_unit(UNTIL - timedelta(days=30), UNTIL) == "day"
    assert bucket_unit(UNTIL - timedelta(days=365), UNTIL) == "week"
    items = [item("news", n, UNTIL - timedelta(hours=n, minutes=5)) for n in range(24)]
    day = volume_counts(items, since=UNTIL - timedelta(hours=24), until=UNTIL, timezone=ZoneInfo("Asia/Shanghai"))
    assert day.unit == "hour" and len(day.starts) == 25  # 12:00 yesterday … 12:00 today, whole hours
    assert sum(1 for count in day.per_source["news"] if count) == 24  # one item per hour, each in its own bar
    assert day.starts[0].utcoffset() == timedelta(hours=8)  # hours of the reader's clock
    year = volume_counts(items, since=UNTIL - timedelta(days=365), until=UNTIL)
    assert year.unit == "week" and all(start.weekday() == 0 for start in year.starts)


def test_cjk_titles_resolve_every_glyph_to_a_font_that_has_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """#9.21: with only Lookout's dependencies installed, matplotlib's font fallback finds each Chinese, Japanese
    and Korean character in a font that has it (not DejaVu Sans, which draws boxes)."""
    from matplotlib.font_manager import FontProperties, fontManager, get_font

    title = "深度求索发布新模型 日本語のニュース 한국어 뉴스"
    family = list(font_family())
    files = fontManager._find_fonts_by_props(FontProperties(family=family))
    for char in set(title) - {" "}:
        owner = next((path for path in files if get_font(path).get_char_index(ord(char))), None)
        assert owner is not None and "DejaVu" not in str(owner), f"{char!r} has no glyph in {files}"
    with caplog.at_level("WARNING", logger="research.chart"):
        write_volume_chart(week_of_items(), path=tmp_path / "cjk.png", title=title, since=SINCE, until=UNTIL)
    assert not [r for r in caplog.records if "missing from font" in r.getMessage() or "CJK" in r.getMessage()]
