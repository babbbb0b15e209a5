"""Benchmark feedparser's own test corpus read through Lookout: every file as a monitor's `rss:<url>` sees it.

feedparser's repository (BSD-2-Clause) holds ~2,100 small feeds written to test a feed reader: RSS, Atom, RDF,
CDF, relative links and xml:base, languages, entities, 745 hostile-HTML cases, encodings, ill-formed documents.
This script takes them from a local mirror of that repository (a bare git repo; `--repo PATH`), serves each from
its own process on 127.0.0.1 with the HTTP headers its header comment names (as feedparser's harness does:
`text/xml` by default), and reads it with Lookout's `sources.rss.FeedSource` on the real `HttpClient` (private
addresses allowed). A file whose entries all lack a link gives Lookout nothing to cite, so it is served a second
time with a link added to each entry ("+link"), so its titles and descriptions still reach the renderers. The
items of each file then go the way a digest shows them: `research.rank` → `research.digest.extractive_digest` →
`render_digest_markdown` → Telegram HTML, Slack mrkdwn and terminal plain text.

Per corpus folder it counts: files; feeds read; items; errors by kind; tracebacks (any exception that is not a
`SourceError`: must be 0); items with an empty title; items whose title or text keeps HTML tags or entities (a
`<b>`, an `&amp;`); rendered digests carrying markup from the feed (`<script`, `javascript:`, `onerror=`, an
`&amp;amp;` double escape, or more formatting tags or links than the same digest with neutral words in place of
the feed's); links that are not absolute http(s); links that differ from the link the corpus expects; entries
whose expected date is missing or wrong; text with mojibake (U+FFFD, `Ã©`-style sequences).

Run: uv run python bench/feeds_corpus.py [--repo /work/.mirror/kurtmckee+feedparser/repo] [--only wellformed/rss]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.fake_process import serving

DEFAULT_REPO = Path("/work/.mirror/kurtmckee+feedparser/repo")
EXAMPLES = 3
NOW = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
_HEADER = re.compile(rb"^Header:\s+([^:]+):(.*)$", re.MULTILINE)
_EXPECT = re.compile(rb"^Expect:\s*(.*)$", re.MULTILINE)
_TAG_LEFT = re.compile(r"</?(?:a|b|i|em|strong|p|div|span|img|script|br|font|u|s|code|pre|iframe|object)\b[^>]*>", re.I)
_ENTITY_LEFT = re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z]{2,8});", re.I)
_HOSTILE = ("<script", "javascript:", "onerror=", "onload=", "&amp;amp;", "&amp;lt;")
_MOJIBAKE = re.compile("\ufffd|Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf]")
_LATIN1 = re.compile("[\u0080-\u00ff]")
_TELEGRAM_TAGS = re.compile(r"<(b|i|u|s|code|pre|a|blockquote|tg-spoiler|span)\b")
_SLACK_STYLE = re.compile(r"(?<![\w*_~`])[*_~`](?=\S)|(?<=\S)[*_~`](?![\w*_~`])")
"""A mrkdwn mark where Slack may read it as one (at a word's edge): the feed's own text must add none."""
_SLACK_MARKS = re.compile(r"<(?:https?:|mailto:|!|@|#)[^>]*>")
_DATE_KEYS = re.compile(
    r"entries\[0\]\['(published|updated|created|issued|modified|date)(_parsed)?'\]\s*==\s*(\([^)]*\)|u?'[^']*'|u?\"[^\"]*\")"
)
_LINK_EXPECT = re.compile(r"entries\[0\](?:\['link'\]|\.link|\['links'\]\[0\]\['href'\])\s*==\s*u?'([^']*)'")
_HARNESS = "http://127.0.0.1:8097"
"""Where feedparser's own harness serves the corpus: expected links that name it are read against this server."""
_ITEM = re.compile(rb"<(item|entry)(\s[^>]*)?>(.*?)</\1>", re.DOTALL)


# ---- the server (its own process) -----------------------------------------------------------------------------


class _Handler(SimpleHTTPRequestHandler):
    """Serves the corpus directory with the headers each file's comment asks for (feedparser's harness's rule)."""

    def send_head(self) -> Any:
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        data = path.read_bytes()
        headers = {name.decode().strip(): value.decode().strip() for name, value in _HEADER.findall(data[:2000])}
        content_type = headers.pop("Content-type", headers.pop("Content-Type", "text/xml"))
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        import io

        return io.BytesIO(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(directory: str, port: int) -> None:
    handler = lambda *a, **k: _Handler(*a, directory=directory, **k)  # noqa: E731
    ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()


# ---- the corpus -------------------------------------------------------------------------------------------------


def export_corpus(repo: Path, target: Path, only: str | None) -> list[str]:
    """Every corpus file (tests/**.xml) written under `target`; their paths relative to tests/."""
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "tests/"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    names = [n for n in names if n.endswith((".xml", ".rdf", ".json")) and n.count("/") >= 2]
    if only:
        names = [n for n in names if n.removeprefix("tests/").startswith(only)]
    batch = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input=b"".join(f"HEAD:{n}\n".encode() for n in names), check=True, capture_output=True,
    ).stdout  # fmt: skip
    offset = 0
    for name in names:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        data = batch[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1
        out = target / name.removeprefix("tests/")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        filled, added_link = _filled(data)
        if filled != data:
            suffix = ".linked" if added_link else ".filled"
            out.with_name(out.stem + suffix + out.suffix).write_bytes(filled)
    return [n.removeprefix("tests/") for n in names]


def _filled(data: bytes) -> tuple[bytes, bool]:
    """The document with a link and a title added to each entry that lacks one; whether any link was added."""
    counter = iter(range(1, 10_000))
    added_link = False

    def add(match: re.Match[bytes]) -> bytes:
        nonlocal added_link
        tag, attributes, body = match.group(1), match.group(2) or b"", match.group(3)
        number = next(counter)
        extra = b""
        if b"<link" not in body:
            added_link = True
            if tag == b"entry":
                extra += b'<link rel="alternate" href="http://example.org/entry/%d"/>' % number
            else:
                extra += b"<link>http://example.org/item/%d</link>" % number
        if b"<title" not in body:
            extra += b"<title>Corpus entry %d</title>" % number
        return b"<%s%s>%s%s</%s>" % (tag, attributes, extra, body, tag)

    filled = _ITEM.sub(add, data)
    return filled, added_link


@dataclass
class Expectation:
    date: datetime | None = None
    """The first entry's date as the corpus expects it (published, else updated, else created)."""
    link: str | None = None


def expectation(data: bytes) -> Expectation:
    import feedparser

    found = _EXPECT.search(data[:3000])
    if not found:
        return Expectation()
    text = found.group(1).decode("utf-8", "replace")
    result = Expectation()
    for _key, parsed, literal in _DATE_KEYS.findall(text):
        try:
            value = ast.literal_eval(literal.lstrip("u"))
        except (ValueError, SyntaxError):
            continue
        moment = None
        if parsed and isinstance(value, tuple) and len(value) >= 6:
            moment = datetime(*value[:6]).replace(tzinfo=UTC)
        elif isinstance(value, str):
            struct = feedparser.datetimes._parse_date(value)
            moment = datetime(*struct[:6]).replace(tzinfo=UTC) if struct else None
        if moment is not None and result.date is None:
            result.date = moment
    link = _LINK_EXPECT.search(text)
    if link:
        result.link = link.group(1)
    return result


# ---- reading and rendering ----------------------------------------------------------------------------------------


@dataclass
class Row:
    files: int = 0
    read: int = 0
    items: int = 0
    linked_items: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    tracebacks: int = 0
    empty_title: int = 0
    markup_left: int = 0
    hostile: int = 0
    not_http: int = 0
    link_mismatch: int = 0
    links_expected: int = 0
    dates_expected: int = 0
    date_missing: int = 0
    date_wrong: int = 0
    mojibake: int = 0
    title_differs: int = 0
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def note(self, kind: str, example: str) -> None:
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)


def render_all(markdown: str) -> tuple[str, str, str]:
    from bots.slack.render import markdown_to_mrkdwn
    from bots.telegram.render import markdown_to_telegram_html
    from bots.terminal.render import markdown_to_plain

    return markdown_to_telegram_html(markdown), markdown_to_mrkdwn(markdown), markdown_to_plain(markdown)


def check_rendering(items: list[Any], row: Row, name: str, *, literal: bool) -> None:
    """`literal`: every item's text is the feed's own plain text, which may spell `<b>` or `&amp;` as words."""
    from research.digest import extractive_digest, render_digest_markdown
    from research.rank import rank

    if not items:
        return
    ranked = rank(items, topic="news", now=NOW)
    digest = extractive_digest(ranked, topic="news", now=NOW)
    neutral = digest.model_copy(
        update={
            "headline": "headline",
            "developments": [d.model_copy(update={"text": "development"}) for d in digest.developments],
            "disputed": [c.model_copy(update={"claim": "claim"}) for c in digest.disputed],
            "cited": [c.model_copy(update={"title": "title"}) for c in digest.cited],
        }
    )
    telegram, slack, plain = render_all(render_digest_markdown(digest))
    telegram_0, slack_0, _plain_0 = render_all(render_digest_markdown(neutral))
    lowered = [telegram.lower(), slack.lower(), plain.lower()]
    markers = _HOSTILE[:4] if literal else _HOSTILE
    reasons = [marker for marker in markers if any(marker in text for text in lowered)]
    if Counter(_TELEGRAM_TAGS.findall(telegram)) != Counter(_TELEGRAM_TAGS.findall(telegram_0)):
        reasons.append("telegram formatting")
    if len(_SLACK_MARKS.findall(slack)) != len(_SLACK_MARKS.findall(slack_0)):
        reasons.append("slack links")
    if len(_SLACK_STYLE.findall(slack)) != len(_SLACK_STYLE.findall(slack_0)):
        reasons.append("slack formatting")
    if _TAG_LEFT.search(plain) and not literal:
        reasons.append("tag in plain text")
    if reasons:
        row.hostile += 1
        row.note("hostile", f"{name}: {', '.join(reasons)}")


@dataclass
class Meant:
    """What a feed's entries say, read by feedparser alone and taken as each construct's type says (plain text as
    written, HTML and XHTML as their visible text): Lookout should show exactly these."""

    titles: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)

    def as_written(self, item: Any) -> bool:
        # An entry with no title is titled by the start of its text (`sources.feeds.title_from_text`).
        from_text = not self.titles and any(text.startswith(item.title.rstrip("…")) for text in self.texts)
        return (item.title in self.titles or from_text) and (not item.text or item.text in self.texts)


def meant(data: bytes) -> Meant:
    import io

    import feedparser

    from sources.feeds import html_to_text

    def plain_text(text: str) -> str:
        return "\n".join(line for line in (" ".join(line.split()) for line in text.splitlines()) if line)

    def read(detail: Any) -> str | None:
        if not detail or not detail.get("value"):
            return None
        html = "html" in str(detail.get("type") or "html")
        text = html_to_text(detail["value"]) if html else plain_text(detail["value"])
        # feedparser alone cannot decode an undeclared legacy charset: there is no oracle for those.
        return None if _LATIN1.search(text) else text

    found = Meant()
    for entry in feedparser.parse(io.BytesIO(data)).entries:
        title = read(entry.get("title_detail"))
        if title is not None:
            found.titles.add(" ".join(title.split()))
        for detail in [entry.get("summary_detail"), *(entry.get("content") or [])]:
            text = read(detail)
            if text is not None:
                found.texts.add(text)
    return found


def check_items(
    items: list[Any], row: Row, name: str, expected: Expectation, *, linked: bool, base: str, feed: Meant
) -> None:
    titles = feed.titles
    for item in items:
        if not item.title.strip():
            row.empty_title += 1
            row.note("empty title", name)
        if titles and item.title not in titles and not item.title.endswith("…"):
            row.title_differs += 1
            row.note("title", f"{name}: {item.title[:50]!r} not in {sorted(titles)[:2]!r}")
        # A plain-text title may name a tag or spell an entity: "History of the <blink> tag".
        if not feed.as_written(item) and (_TAG_LEFT.search(item.title) or _ENTITY_LEFT.search(item.title + item.text)):
            row.markup_left += 1
            row.note("markup", f"{name}: {item.title[:60]!r} / {item.text[:60]!r}")
        if _MOJIBAKE.search(item.title + item.text):
            row.mojibake += 1
            row.note("mojibake", f"{name}: {item.title[:40]!r} / {item.text[:40]!r}")
        parts = urlsplit(str(item.url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            row.not_http += 1
            row.note("not http", f"{name}: {item.url}")
    if not items:
        return
    first = items[0]
    if expected.link and not linked and urlsplit(expected.link).scheme in ("http", "https"):
        row.links_expected += 1
        want = expected.link.replace(_HARNESS, base).rstrip("/").lower()
        if str(first.url).rstrip("/").lower() != want:
            row.link_mismatch += 1
            row.note("link", f"{name}: {first.url} ≠ {expected.link}")
    if expected.date is not None:
        row.dates_expected += 1
        if first.published is None:
            row.date_missing += 1
            row.note("date missing", f"{name}: expected {expected.date:%Y-%m-%d %H:%M}")
        elif first.published != expected.date:
            row.date_wrong += 1
            row.note("date wrong", f"{name}: {first.published:%Y-%m-%d %H:%M} ≠ {expected.date:%Y-%m-%d %H:%M}")


async def read_one(client: Any, url: str) -> tuple[list[Any], str | None]:
    """The items a monitor's `rss:<url>` gets from one file, or the error kind that stopped it."""
    from sources.base import SearchQuery, SourceError
    from sources.config import SourcesConfig
    from sources.rss import FeedSource

    source = FeedSource(client=client, config=SourcesConfig(allow_private_urls=True), feed_url=url)
    try:
        batch = await source.search(SearchQuery(text="", limit=10_000))
    except SourceError as exc:
        return [], f"{exc.kind}: {str(exc)[:90]}"
    return batch.items, None


async def run(base: str, root: Path, names: list[str]) -> dict[str, Row]:
    from sources.http import HttpClient

    rows: dict[str, Row] = defaultdict(Row)
    async with HttpClient(user_agent="LookoutBench/0.1", allow_private=True, max_retries=0) as client:
        for name in names:
            folder = name.rsplit("/", 1)[0]
            row = rows[folder]
            row.files += 1
            data = (root / name).read_bytes()
            expected = expectation(data)
            variants = [(name, False)]
            stem, extension = name.rsplit(".", 1)
            if (root / f"{stem}.linked.{extension}").exists():
                variants.append((f"{stem}.linked.{extension}", True))
            elif (root / f"{stem}.filled.{extension}").exists():
                variants.append((f"{stem}.filled.{extension}", False))
            for served, linked in variants:
                try:
                    items, error = await read_one(client, f"{base}/{served}")
                except Exception:
                    row.tracebacks += 1
                    row.note("traceback", f"{served}: {traceback.format_exc().splitlines()[-1]}")
                    continue
                if error is not None:
                    if served == name:
                        kind, _, message = error.partition(": ")
                        row.errors[kind] += 1
                        row.note(f"error {kind}", f"{served}: {message}")
                    continue
                if served != name:
                    row.linked_items += len(items)
                else:
                    row.read += 1
                    row.items += len(items)
                try:
                    judged = expected if served == variants[-1][0] else Expectation()  # links and dates once a file
                    feed = meant((root / served).read_bytes())
                    check_items(items, row, served, judged, linked=linked, base=base, feed=feed)
                    check_rendering(items, row, served, literal=all(feed.as_written(item) for item in items))
                except Exception:
                    row.tracebacks += 1
                    row.note("traceback", f"{served}: {traceback.format_exc().splitlines()[-1]}")
    return rows


COLUMNS = (
    ("files", "files"), ("read", "read"), ("items", "items"), ("+link items", "linked_items"),
    ("tracebacks", "tracebacks"), ("empty title", "empty_title"), ("tags/entities left", "markup_left"),
    ("markup rendered", "hostile"), ("not http(s)", "not_http"), ("links expected", "links_expected"),
    ("link ≠ expected", "link_mismatch"), ("dates expected", "dates_expected"), ("date missing", "date_missing"),
    ("date wrong", "date_wrong"), ("mojibake", "mojibake"), ("title ≠ feed's", "title_differs"),
)  # fmt: skip
"""The table's counting columns: header, then the `Row` attribute (errors come after `+link items`)."""


def _cells(label: str, row: Row) -> str:
    errors = ", ".join(f"{kind} {count}" for kind, count in sorted(row.errors.items())) or "0"
    values = [str(getattr(row, attribute)) for _, attribute in COLUMNS]
    return "| " + " | ".join([label, *values[:4], errors, *values[4:]]) + " |"


def print_table(rows: dict[str, Row], seconds: float, *, examples: bool) -> None:
    headers = [header for header, _ in COLUMNS]
    headers = ["folder", *headers[:4], "errors", *headers[4:]]
    print(f"{sum(r.files for r in rows.values())} files in {seconds:.1f} s")
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    total = Row()
    for folder in sorted(rows):
        print(_cells(folder, rows[folder]))
        for _, attribute in COLUMNS:
            setattr(total, attribute, getattr(total, attribute) + getattr(rows[folder], attribute))
        total.errors.update(rows[folder].errors)
    print(_cells("**all**", total))
    if examples:
        for folder in sorted(rows):
            for kind, shown in rows[folder].examples.items():
                for line in shown:
                    print(f"  [{folder}] {kind}: {line}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO, help="a clone or bare mirror of feedparser")
    parser.add_argument("--only", help="a folder under tests/, e.g. wellformed/sanitize")
    parser.add_argument("--examples", action="store_true", help="print up to three examples of each finding")
    args = parser.parse_args()
    if not (args.repo / "HEAD").exists() and not (args.repo / ".git").exists():
        sys.exit(f"no feedparser repository at {args.repo} (pass --repo)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = export_corpus(args.repo, root, args.only)
        with serving(__file__, "--serve", str(root), ready=names[0]) as base:
            started = time.perf_counter()
            rows = asyncio.run(run(base, root, names))
            seconds = time.perf_counter() - started
    print_table(rows, seconds, examples=args.examples)


if __name__ == "__main__":
    main()
