"""A digest's web page through the real HTTP server (uvicorn on a port): the page shows every story, the citations
as links, the tone, the chart and a CSV download, hostile titles as text; its document and files are under the same
token; a conditional GET is answered 304; a wrong token is a bare 404 that says nothing; and headless Chromium
renders it with the chart loaded."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.http_server import build_http_app, feed_routes, page_routes, serve_http
from monitors import DigestPages, MonitorFeeds
from storage import Database
from storage.repositories import RunRepository
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.telegram import running_fake_telegram
from tests.fresh_payloads import fresh_hn_payload
from tests.monitors.stored_run import HOSTILE, StoredRun, store_digest_run

SCHEMA = Path(__file__).parents[2] / "docs" / "schemas" / "digest-document.schema.json"
PUBLIC = "https://lookout.example.org/base"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    url: str
    pages: DigestPages
    stored: StoredRun
    page_url: str
    """The page's URL as a message would give it (under `public_url` when set)."""
    token: str
    database: Database


async def _serve(database: Database, tmp_path: Path, *, public_url: str | None) -> AsyncIterator[Served]:
    stored = await store_digest_run(database, tmp_path / "exports")
    pages = DigestPages(database, public_url=public_url)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    run = await RunRepository(database).get(stored.run_id)
    assert run is not None
    issued = DigestPages(database, public_url=public_url or url)
    page_url = await issued.url(run)
    assert page_url is not None
    token = page_url.rsplit("/", 1)[1]
    stop = asyncio.Event()
    routes = [*feed_routes(MonitorFeeds(database), public_url=public_url), *page_routes(pages)]
    serving = asyncio.create_task(serve_http(build_http_app(checks={}, routes=routes), host="127.0.0.1", port=port,
                                             stop=stop))  # fmt: skip
    async with httpx.AsyncClient() as client:
        for _ in range(100):
            try:
                await client.get(f"{url}/healthz")
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("server never came up")
    try:
        yield Served(url=url, pages=pages, stored=stored, page_url=page_url, token=token, database=database)
    finally:
        stop.set()
        await asyncio.wait_for(serving, timeout=10)


@pytest.fixture
async def served(database: Database, tmp_path: Path) -> AsyncIterator[Served]:
    async for served in _serve(database, tmp_path, public_url=PUBLIC):
        yield served


@pytest.fixture
async def served_locally(database: Database, tmp_path: Path) -> AsyncIterator[Served]:
    """No PUBLIC_URL: the page's URLs are the address the request came to (what a browser on this machine uses)."""
    async for served in _serve(database, tmp_path, public_url=None):
        yield served


class _Links(HTMLParser):
    """The page's links, images and visible text, as a browser would read them."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self.images: list[str] = []
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and values.get("href"):
            self.links[str(values["href"])] = ""
        if tag == "img" and values.get("src"):
            self.images.append(str(values["src"]))
        if tag == "script":
            self.scripts += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


async def test_the_page_shows_every_story_citations_tone_chart_and_csv(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        page = await client.get(f"/digests/{served.token}")
    assert served.page_url == f"{PUBLIC}/digests/{served.token}"
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["referrer-policy"] == "no-referrer" and "noindex" in page.headers["x-robots-tag"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "https://lookout.example.org" in page.headers["content-security-policy"]  # the chart's origin
    html = page.text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert "prefers-color-scheme: dark" in html

    parsed = _Links()
    parsed.feed(html)
    text = " ".join(" ".join(parsed.text).split())
    assert parsed.scripts == 0, "a title's <script> must stay text"
    for title in served.stored.titles:  # all 50 stories, best first
        assert title in text
    positions = [text.index(title) for title in served.stored.titles]
    assert positions == sorted(positions)
    assert HOSTILE in text and "&lt;script&gt;" in html
    assert "https://example.com/hn/1/0" in parsed.links and "https://example.com/arxiv/50/2" in parsed.links
    assert "tone: positive (+0.31)" in text and "Since the last digest: Seven new models since yesterday." in text
    # a development's citation is a link to the cited report; the hostile title stays an escaped attribute
    assert (
        '<a href="https://example.com/hn/1/0" title="Story 01: DeepSeek ships model 1" rel="noreferrer noopener">1</a>'
        in html
    )
    assert (
        'title="Story 02: DeepSeek ships model 2 &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;"'
        in html
    )
    assert "Self-check: completeness 80%, quality 70%" in text
    base = f"{PUBLIC}/digests/{served.token}"
    assert parsed.images == [f"{base}/chart.png"]
    assert f"{base}/digest.csv" in parsed.links and f"{base}.json" in parsed.links


async def test_document_chart_and_csv_under_the_same_token(served_locally: Served) -> None:
    served = served_locally
    async with httpx.AsyncClient(base_url=served.url) as client:
        document = await client.get(f"/digests/{served.token}.json")
        chart = await client.get(f"/digests/{served.token}/chart.png")
        csv = await client.get(f"/digests/{served.token}/digest.csv")

    assert document.status_code == 200 and document.headers["content-type"] == "application/json"
    body = json.loads(document.content)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(body)
    assert body["page_url"] == f"{served.url}/digests/{served.token}"
    assert len(body["stories"]) == 50 and body["stories"][0]["items"][0]["title"] == served.stored.titles[0]
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/png"
    assert chart.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.headers["content-disposition"].startswith("attachment;")
    assert f"deepseek-{served.stored.run_id}.csv" in csv.headers["content-disposition"]
    assert csv.text.count("\n") == 1 + 150


async def test_a_conditional_get_is_answered_304(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        first = await client.get(f"/digests/{served.token}")
        again = await client.get(f"/digests/{served.token}", headers={"If-None-Match": first.headers["etag"]})
        since = await client.get(
            f"/digests/{served.token}", headers={"If-Modified-Since": first.headers["last-modified"]}
        )
        head = await client.head(f"/digests/{served.token}")
        chart = await client.get(f"/digests/{served.token}/chart.png")
        chart_again = await client.get(
            f"/digests/{served.token}/chart.png", headers={"If-None-Match": chart.headers["etag"]}
        )
    assert first.status_code == 200 and first.headers["last-modified"] == "Fri, 20 Nov 2026 09:05:00 GMT"
    assert again.status_code == 304 and again.content == b""
    assert since.status_code == 304
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == first.headers["etag"]
    assert chart.status_code == 200 and chart_again.status_code == 304


@pytest.mark.parametrize(
    "path",
    [
        "/digests/{wrong}",
        "/digests/{wrong}.json",
        "/digests/{wrong}/chart.png",
        "/digests/{wrong}/digest.csv",
        "/digests/{token}.atom",
        "/digests/{token}/../../etc/passwd",
        "/digests/{token}/lookout.db",
        "/digests/{token}/{token}.csv",
        "/digests/x'%20OR%201=1--",
        "/digests/",
    ],
)
async def test_a_wrong_token_or_name_is_a_bare_404(served: Served, path: str) -> None:
    wrong = served.token[:-2] + ("AA" if not served.token.endswith("AA") else "BB")
    async with httpx.AsyncClient(base_url=served.url) as client:
        answer = await client.get(path.format(wrong=wrong, token=served.token))
    assert answer.status_code == 404
    assert answer.content in (b"Not Found", b"")
    assert "deepseek" not in answer.text.lower()


async def test_a_deleted_run_takes_its_page_and_files_with_it(served: Served) -> None:
    await RunRepository(served.database).delete(served.stored.run_id)
    async with httpx.AsyncClient(base_url=served.url) as client:
        page = await client.get(f"/digests/{served.token}")
        chart = await client.get(f"/digests/{served.token}/chart.png")
    assert page.status_code == chart.status_code == 404


async def test_feed_entries_link_to_their_page(served: Served) -> None:
    feeds = MonitorFeeds(served.database)
    token = await feeds.token(served.stored.monitor_id)
    async with httpx.AsyncClient(base_url=served.url) as client:
        atom = await client.get(f"/feeds/{token}.atom")
        as_json = await client.get(f"/feeds/{token}.json")
    assert f'rel="related" type="text/html" href="{served.page_url}"' in atom.text
    item = json.loads(as_json.content)["items"][0]
    assert f'<a href="{served.page_url}">Full digest</a>' in item["content_html"]


# --- a real browser ------------------------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRE_CHROMIUM = os.environ.get("LOOKOUT_REQUIRE_CHROMIUM") == "1"


def _chromium(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    """One headless Chromium run with a profile of its own (nothing cached from an earlier run)."""
    assert CHROMIUM is not None
    profile = Path(tempfile.mkdtemp(prefix="profile-", dir=tmp_path))
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, timeout=90, check=False)


@pytest.fixture
def chromium() -> None:
    if CHROMIUM is None:
        if REQUIRE_CHROMIUM:
            pytest.fail("LOOKOUT_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); CI sets LOOKOUT_REQUIRE_CHROMIUM=1")


@pytest.mark.parametrize("backend", ["sqlite"])  # the browser's part does not depend on the database
async def test_headless_chromium_renders_the_stories_and_the_chart(
    chromium: None, served_locally: Served, tmp_path: Path
) -> None:
    served = served_locally
    url = f"{served.url}/digests/{served.token}"
    dom = await asyncio.to_thread(_chromium, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    rendered = dom.stdout.decode()
    for title in served.stored.titles[:1] + served.stored.titles[2:]:  # the hostile one (2) is escaped in the DOM
        assert title in rendered
    assert "&lt;script&gt;alert" in rendered and "<script>alert" not in rendered
    assert f'src="{url}/chart.png"' in rendered

    # The chart is the page's only image: a screenshot shows its coloured bars only if the browser fetched and decoded
    # the PNG. Links are coloured too, so the check is the difference from the same page without its chart.
    shot = tmp_path / "page.png"
    taken = await asyncio.to_thread(_chromium, tmp_path, f"--screenshot={shot}", "--window-size=800,1800", url)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr.decode(errors="replace")[-2000:]

    blank = tmp_path / "blank.png"
    served.pages._rendered.clear()  # the same page without its chart file: no coloured pixels
    run = await RunRepository(served.database).get(served.stored.run_id)
    assert run is not None
    Path(str(run.artifacts["chart"])).unlink()
    taken = await asyncio.to_thread(_chromium, tmp_path, f"--screenshot={blank}", "--window-size=800,1800", url)
    assert taken.returncode == 0 and blank.is_file()
    with_chart, without = _coloured_pixels(shot), _coloured_pixels(blank)
    assert with_chart - without > 20_000, (with_chart, without)


def _coloured_pixels(path: Path) -> int:
    """Pixels that are clearly coloured (not grey, white or black: not text, not background): the chart's bars."""
    from PIL import Image

    with Image.open(path) as image:
        data = image.convert("RGB").tobytes()
    pixels = zip(data[0::3], data[1::3], data[2::3], strict=True)
    return sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60)


# --- the operator's whole path ---------------------------------------------------------------------------------------


def test_lookout_run_sends_the_link_and_serves_the_page(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """`monitors run` stores a digest; `lookout run` delivers it to Telegram ending with the page's link under
    PUBLIC_URL, and serves that page (and its chart) on its own port."""
    hn = fresh_hn_payload()
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse(body=hn, content_type="application/json"))
    port = _free_port()
    with running_fake_telegram() as telegram:
        environment = {
            "DATA_DIR": str(tmp_path / "data"),
            "HN_API_URL": f"{fake_server.url}/hn",
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "HTTP_PORT": str(port),
            "PUBLIC_URL": PUBLIC,
        }
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        added = CliRunner().invoke(cli, ["monitors", "add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn"])
        assert added.exit_code == 0, added.output
        ran = CliRunner().invoke(cli, ["monitors", "run", "1"])
        assert ran.exit_code == 0, ran.output

        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "lookout"), "run"],
            env={**os.environ, **environment}, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            link = None
            while link is None and time.monotonic() < deadline:
                texts = " ".join(message.text or "" for message in telegram.texts(4242))
                link = re.search(rf"{re.escape(PUBLIC)}(/digests/[A-Za-z0-9_-]{{32}})", texts)
                time.sleep(0.2)
            assert link is not None, "the digest never arrived with its page link"
            page = httpx.get(f"http://127.0.0.1:{port}{link[1]}", timeout=10)
            chart = httpx.get(f"http://127.0.0.1:{port}{link[1]}/chart.png", timeout=10)
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, output
    assert page.status_code == 200 and "DeepSeek" in page.text and "All " in page.text
    assert f'src="{PUBLIC}{link[1]}/chart.png"' in page.text
    assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")
    assert link[1] not in output  # page tokens stay out of the log
