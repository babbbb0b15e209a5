"""Inside the built image: each feature that a cut of the image could break still works (issue #28).

Run in the container by `bench/image_run.py` (`podman run -i IMAGE python - < bench/image_checks.py`, as the image's
unprivileged user, with the root file system read-only); it also runs on a development checkout
(`uv run python bench/image_checks.py`). One line per check; exits 1 when any fails. What each proves:

- `lookout --help`: the CLI starts (Lookout's own packages, typer and click from bytecode).
- chart: a chart titled in Japanese and Chinese renders to PNG with the packaged CJK font and no missing glyph
  (matplotlib, fontTools, Pillow, kiwisolver, numpy: stripped extension modules, bytecode-only packages).
- terms: Japanese (MeCab with the IPA dictionary, its word table unpacked on this first use) and Chinese (rjieba)
  text are segmented into words, and word rarity reads wordfreq's (cut) lists.
- /language: a tag is checked against babel's CLDR data (`pt-BR` passes, `xx` does not).
- dedupe: two reports of one event become one story through the `scipy.sparse` path (the cut scipy).
- tool docstrings: a pydantic-ai agent offers a tool whose description and argument descriptions come from its
  docstring (griffe), and a Lookout model's field descriptions come from its attribute docstrings (kept sources).
- language detection: German and Japanese text are told apart (the fastText-lite model, py3langid).
- Alembic: every migration applies to a new SQLite database.
- every module of Lookout's packages imports (every library they import at the top, from bytecode), and a web
  page's article is extracted (trafilatura, lxml, justext: their data files and stripped modules).
- kept sources: anyio's lazy import, apprise's plugins, vaderSentiment's lexicon.
- libraries: every extension module in the venv imports, and every ELF file resolves its shared libraries (the
  stripped modules, the slimmed base).
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

CHECKS: list[tuple[str, Callable[[], str]]] = []


def check(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(function: Callable[[], str]) -> Callable[[], str]:
        CHECKS.append((name, function))
        return function

    return register


@check("`lookout --help`")
def cli_help() -> str:
    lookout = shutil.which("lookout")
    assert lookout, "no `lookout` on PATH"
    done = subprocess.run([lookout, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "Usage" in done.stdout, done.stdout + done.stderr
    return "exit 0"


@check("chart with CJK text to PNG")
def chart() -> str:
    from research.chart import font_family, write_volume_chart
    from sources import Item

    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    items = [
        Item(id=f"rss:{n}", source=("rss", "news")[n % 2], url=f"https://example.org/{n}", title="東京",
             published=now - timedelta(hours=3 * n))
        for n in range(12)
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        title = "人工知能の研究 · 人工智能研究"
        path = write_volume_chart(
            items, path=Path(folder) / "chart.png", title=title, since=now - timedelta(days=2), until=now
        )
        data = path.read_bytes()
    missing = [str(warning.message) for warning in caught if "missing from" in str(warning.message)]
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, f"not a chart: {len(data)} bytes"
    assert not missing, missing
    family = font_family()
    assert any("CJK" in name for name in family), family
    return f"{len(data)} bytes, fonts {', '.join(family)}"


@check("Japanese and Chinese terms")
def terms() -> str:
    from research.terms import story_terms

    japanese = story_terms("東京大学の研究者が新しい人工知能の論文を発表した", "ja")
    chinese = story_terms("北京大学的研究人员发布了新的人工智能模型", "zh")
    # MeCab's words (人工 + 知能, 研究 + 者) and jieba's (人工智能 whole), as on a development checkout.
    assert japanese.terms[:9] == ("東京大学", "の", "研究", "者", "が", "新しい", "人工", "知能", "論文"), (
        japanese.terms
    )
    assert chinese.terms == ("北京大学", "的", "研究", "人员", "发布", "了", "新", "人工智能", "模型"), chinese.terms
    assert japanese.rarity["論文"] < 12 and chinese.rarity["模型"] < 11, "wordfreq's lists are not read"
    unpacked = ""
    if Path(sys.prefix) == IMAGE_VENV:  # the image ships the Japanese word table gzipped: unpacked just now
        import ipadic

        table = Path(ipadic.DICDIR) / "sys.dic"
        assert table.is_symlink() and table.resolve().is_file(), f"{table} was not unpacked where it links"
        unpacked = f" (dictionary unpacked to {table.resolve()}, {table.resolve().stat().st_size // 1_000_000} MB)"
    return f"ja {' '.join(japanese.terms[:9])}; zh {' '.join(chinese.terms)}{unpacked}"


@check("/language validation (babel)")
def language_tags() -> str:
    from agent.commands.grammar import language_name

    brazil, made_up = language_name("pt-BR"), language_name("xx")
    assert brazil == "Portuguese (Brazil)" and made_up is None, (brazil, made_up)
    return f"pt-BR → {brazil}, xx → {made_up}"


@check("dedupe through scipy.sparse")
def dedupe() -> str:
    from research.dedupe import cluster_items
    from sources import Item

    titles = [
        "SpaceX Starship completes its first orbital flight and lands safely",
        "Starship completes first orbital flight, SpaceX says, and lands safely",
        "Central bank raises interest rates by half a point amid inflation",
    ]
    items = [Item(id=f"rss:{n}", source="rss", url=f"https://example.org/{n}", title=t) for n, t in enumerate(titles)]
    sizes = sorted(len(cluster.members) for cluster in cluster_items(items))
    assert sizes == [1, 2], sizes
    assert "scipy.sparse" in sys.modules, "the dedupe did not use scipy.sparse"
    return f"stories of sizes {sizes}"


@check("tool and field descriptions from docstrings")
def docstrings() -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from monitors.schedule import Schedule

    seen: dict[str, object] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        (tool,) = info.function_tools
        seen["description"] = tool.description
        seen["city"] = tool.parameters_json_schema["properties"]["city"].get("description")
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def weather(city: str) -> str:
        """Tell today's weather in a city.

        Args:
            city: The city's name, in English.
        """
        return "sunny"

    agent.run_sync("weather in Kyoto?")
    assert seen == {"description": "Tell today's weather in a city.", "city": "The city's name, in English."}, seen
    field = Schedule.model_json_schema()["properties"]["timezone"].get("description", "")
    assert field.startswith("Canonical IANA timezone name"), field
    return f"tool: {seen['description']!r}; Schedule.timezone: {field[:30]!r}…"


@check("language detection")
def languages() -> str:
    from research.language import detect_language

    german = detect_language("Die Regierung hat am Montag neue Regeln für den Schutz der Wälder beschlossen.")
    japanese = detect_language("政府は月曜日に森林を守るための新しい規則を決めたと発表しました。")
    assert (german, japanese) == ("de", "ja"), (german, japanese)
    return f"de, ja: {german}, {japanese}"


@check("Alembic upgrade on SQLite")
def alembic() -> str:
    import sqlite3

    from storage.migrate import newest_revision, upgrade_database

    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "lookout.db"
        asyncio.run(upgrade_database(f"sqlite+aiosqlite:///{database}"))
        with sqlite3.connect(database) as connection:
            (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            tables = connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    assert version == newest_revision(), version
    return f"at {version}, {tables} tables"


@check("every Lookout module imports")
def own_modules() -> str:
    import pkgutil

    names = []
    for package in ("kernel", "storage", "sources", "research", "monitors", "agent", "bots", "app"):
        module = importlib.import_module(package)
        names.append(package)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, f"{package}.")]
    failed = []
    for name in names:
        if name.startswith("storage.migrations.versions") or name.endswith("__main__"):
            continue  # migrations run under Alembic (checked above); `__main__` modules run the CLI
        try:
            importlib.import_module(name)
        except Exception as error:
            failed.append(f"{name}: {error!r}")
    assert not failed, failed
    return f"{len(names)} modules"


@check("a web page's article (trafilatura)")
def page() -> str:
    from sources.http import HttpResponse
    from sources.page import _extract_html

    paragraph = "The council approved the new cycling plan on Monday after a long debate about costs. " * 6
    html = (
        "<html><head><title>Cycling plan approved</title><meta name='author' content='Ana Ruiz'></head><body>"
        f"<nav>Home | News</nav><article><h1>Cycling plan approved</h1><p>{paragraph}</p><p>{paragraph}</p>"
        "</article><footer>Contact us</footer></body></html>"
    )
    response = HttpResponse(
        url="https://example.org/news/cycling", status=200,
        headers={"content-type": "text/html; charset=utf-8"}, content=html.encode(),
    )  # fmt: skip
    found = _extract_html(response.url, response, "text/html", 20_000)
    assert "cycling plan" in found.text and "Contact us" not in found.text, found.text[:200]
    assert found.title == "Cycling plan approved", found.title
    return f"{len(found.text)} characters, title {found.title!r}"


@check("libraries that read their own sources")
def kept_sources() -> str:
    import anyio
    import apprise
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    assert callable(anyio.create_task_group) and callable(anyio.to_thread.run_sync)
    # anyio reads its own `__init__.py` to import lazily; without it, it imports all of itself at once.
    fresh = subprocess.run(
        [sys.executable, "-c", "import anyio, sys; print('anyio._core._fileio' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert fresh.stdout.strip() == "False", "anyio imported all of itself: its sources are missing"
    notifier = apprise.Apprise()
    assert notifier.add("json://127.0.0.1:9/hook") and notifier.add("ntfy://topic"), "apprise found no plugins"
    score = SentimentIntensityAnalyzer().polarity_scores("a wonderful, great result")["compound"]
    assert score > 0.5, score
    return f"anyio imports lazily, apprise json:// and ntfy://, vader {score:.2f}"


@check("extension modules and shared libraries")
def libraries() -> str:
    site = Path(importlib.import_module("pydantic").__file__ or "").parents[1]
    names = []
    for path in sorted(site.rglob("*.so")):
        relative = path.relative_to(site)
        if any(part.endswith(".libs") for part in relative.parts):
            continue
        dotted = ".".join([*relative.parent.parts, relative.name.split(".", 1)[0]])
        if all(part.isidentifier() for part in dotted.split(".")):
            names.append(dotted)
    failed = []
    importlib.import_module("psycopg")  # psycopg_binary refuses to be imported first
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:
            failed.append(f"{name}: {error}")
    # Modules that need what no container has (a display, an optional dependency never installed) fail
    # the same way on a development checkout; the build stage checked the rest imports before and after strip.
    unexpected = [line for line in failed if not line.startswith(OPTIONAL_MODULES)]
    assert not unexpected, unexpected
    ldd = shutil.which("ldd")
    unresolved: list[str] = []
    if ldd and Path(sys.prefix) == IMAGE_VENV:  # a development machine has its own unrelated libraries
        roots = [Path(sys.prefix), Path("/usr/lib"), Path("/usr/bin")]
        files = [str(p) for root in roots for p in root.rglob("*") if p.is_file() and _is_elf(p)]
        optional = tuple(str(site / name.replace(".", "/")) for name in OPTIONAL_MODULES)
        for start in range(0, len(files), 100):
            done = subprocess.run([ldd, *files[start : start + 100]], capture_output=True, text=True, check=False)
            current = ""
            for line in done.stdout.splitlines():
                if not line.startswith(("\t", " ")) and line.endswith(":"):
                    current = line[:-1]  # ldd of several files heads each one's libraries with its path
                elif "not found" in line and not current.startswith(optional):
                    unresolved.append(f"{current}: {line.strip()}")
    assert not unresolved, unresolved[:10]
    return f"{len(names) - len(failed)}/{len(names)} modules import; every ELF file resolves its libraries"


IMAGE_VENV = Path("/app/.venv")
"""Where the image keeps its virtual environment: the shared-library check runs only there."""

OPTIONAL_MODULES = (
    "matplotlib.backends._tkagg", "PIL._imagingtk", "scipy.sparse.csgraph", "scipy.sparse.linalg", "scipy.linalg",
    "mypy", "greenlet.tests",
)  # fmt: skip
"""Extension modules that never import here: matplotlib's and Pillow's Tk parts need Tk, which no image ships;
scipy's graph and linear-algebra parts need the scipy.linalg the image cuts (the dedupe uses neither); mypyc-compiled
mypy and greenlet's tests are on a development checkout only."""


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False


def main() -> None:
    failures = 0
    for name, function in CHECKS:
        try:
            print(f"ok   {name}: {function()}", flush=True)
        except Exception:
            failures += 1
            print(f"FAIL {name}:\n{traceback.format_exc()}", flush=True)
    print(f"image checks: {len(CHECKS) - failures} of {len(CHECKS)} hold")
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
