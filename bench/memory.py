"""Resident memory of `lookout run`: idle (Telegram on, no monitor due) and after it delivered a 200-item digest.

`lookout run` is the real service in its own process, with Telegram on through the fake Bot API
(`tests.fakes.telegram.FakeTelegram`) and one monitor over an RSS feed of 200 items (a fake HTTP server), both
running in this process, so the memory read is Lookout's alone. No language model (the digest is extractive; a
model's client adds its own memory) and no embedding model. The headlines are in five languages (English, Italian,
German, Chinese, Japanese: every segmenter and both language detectors load), or English only with `--english-only`.
Steps: start the service and wait for it to answer /healthz and register its commands; stay idle for `--idle`
seconds and read VmRSS from /proc; send `/digest 1` in the chat and wait for the digest's CSV to be delivered; read
VmRSS and the peak (VmHWM) 3 s later, and again once `--settle` seconds have passed (by then what Lookout keeps only
while in use, py3langid's model, has been dropped: `research.language.SECOND_OPINION_KEPT_SECONDS`); stop it with
SIGTERM.

    uv run python bench/memory.py [--idle 20] [--settle 70] [--items 200] [--english-only]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import escape

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fake_process import free_port  # noqa: E402
from tests.fakes.http_server import FakeResponse, running_fake_server  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

CHAT = 4242
TARGETS_MB = {"idle": 150, "after a digest": 350}
"""Resident memory the issue sets (#28)."""
WORDS = (
    "DeepSeek releases open weights for its new reasoning model",
    "DeepSeek pricing cut puts pressure on rivals",
    "Analysts weigh DeepSeek's impact on chip demand",
    "DeepSeek rilascia un nuovo modello linguistico open source",
    "DeepSeek veröffentlicht ein neues offenes Sprachmodell",
    "深度求索 DeepSeek 发布新一代大模型",
    "DeepSeek が新しい推論モデルを公開",
)


def _feed(items: int, *, english_only: bool) -> bytes:
    now = datetime.now(UTC)
    entries = []
    words = WORDS[:3] if english_only else WORDS
    for n in range(items):
        title = f"{words[n % len(words)]} (report {n})"
        published = (now - timedelta(minutes=7 * n)).strftime("%a, %d %b %Y %H:%M:%S +0000")
        text = f"{title}. Story number {n} says more about DeepSeek, benchmarks {n % 13} and prices {n % 7}."
        entries.append(
            f"<item><title>{escape(title)}</title><link>https://news{n % 17}.example.org/story/{n}</link>"
            f"<description>{escape(text)}</description><pubDate>{published}</pubDate></item>"
        )
    return (
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Bench</title>'
        f"<link>https://example.org/</link>{''.join(entries)}</channel></rss>"
    ).encode()


def _memory_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def _wait(predicate: Callable[[], bool], what: str, seconds: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > seconds:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=20.0, help="Seconds idle before the first reading.")
    parser.add_argument(
        "--settle", type=float, default=70.0, help="Seconds after the digest before the last reading (0: none)."
    )
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument(
        "--english-only", action="store_true", help="English headlines only (default: also it, de, zh, ja)."
    )
    parser.add_argument("--importtime", type=Path, help="Write the service's `-X importtime` lines to this file.")
    options = parser.parse_args()
    lookout = str(Path(sys.executable).with_name("lookout"))
    telegram = FakeTelegram()
    telegram.start()
    with running_fake_server() as server, tempfile.TemporaryDirectory() as data:
        feed = _feed(options.items, english_only=options.english_only)
        server.route("GET", "/feed.xml", FakeResponse(body=feed, content_type="application/rss+xml"))
        port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": data,
            "DATA_DIR": data,
            "HTTP_PORT": str(port),
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "ALLOW_PRIVATE_URLS": "true",
            "LOG_LEVEL": "WARNING",
        }
        subprocess.run(
            [lookout, "monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--schedule", "daily at 03:00",
             "--sources", f"rss:{server.url}/feed.xml"],
            env=env, cwd=data, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.monotonic()
        if options.importtime:
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        errors = options.importtime.open("w") if options.importtime else None
        service = subprocess.Popen([lookout, "run"], env=env, cwd=data, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            _wait(lambda: bool(telegram.calls_to("setMyCommands")), "the bot's commands", 300)
            _wait(lambda: _healthy(f"http://127.0.0.1:{port}/healthz"), "/healthz", 300)
            ready = time.monotonic() - started
            time.sleep(options.idle)
            idle = _memory_mb(service.pid)
            telegram.push_text(CHAT, "/digest 1")
            took = _wait(lambda: bool(telegram.documents(CHAT)), "the digest's files", 600)
            time.sleep(3)
            after = _memory_mb(service.pid)
            settled = None
            if options.settle > 3:
                time.sleep(options.settle - 3)
                settled = _memory_mb(service.pid)
            texts = [message.text or "" for message in telegram.texts(CHAT)]
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=60)
            telegram.stop()
            if errors is not None:
                errors.close()
    languages = "English" if options.english_only else "English, Italian, German, Chinese and Japanese"
    print(f"`lookout run`, Telegram on (fake Bot API), one monitor over an RSS feed of {options.items} items ", end="")
    print(f"in {languages}; ", end="")
    print(f"ready in {ready:.1f} s, idle {options.idle:.0f} s, /digest delivered in {took:.1f} s")
    print(f"({len(server.received('/feed.xml'))} feed request(s), {len(texts)} message(s) in the chat)")
    print()
    print("| moment | RSS | peak RSS (VmHWM) | target |")
    print("|---|---|---|---|")
    print(f"| idle | {idle['VmRSS']:.0f} MB | {idle['VmHWM']:.0f} MB | ≤ {TARGETS_MB['idle']} MB |")
    print(
        f"| 3 s after a {options.items}-item digest | {after['VmRSS']:.0f} MB | {after['VmHWM']:.0f} MB "
        f"| ≤ {TARGETS_MB['after a digest']} MB |"
    )
    if settled is not None:
        print(
            f"| {options.settle:.0f} s after the digest | {settled['VmRSS']:.0f} MB | {settled['VmHWM']:.0f} MB "
            f"| ≤ {TARGETS_MB['after a digest']} MB |"
        )


if __name__ == "__main__":
    main()
