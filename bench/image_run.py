"""The built image as a service: its features work inside it, and `lookout run` answers /healthz and its health check.

First runs `bench/image_checks.py` in a container of the image (as its unprivileged user, root file system
read-only): a chart with CJK text, Japanese and Chinese terms, `/language`, the dedupe's scipy.sparse path, tool
descriptions from docstrings, language detection, an Alembic upgrade, `lookout --help`, the libraries that read their
own sources, every extension module and shared library; each fails when the cut of the image it depends on broke it.
Then it starts the fake Telegram Bot API (`tests.fakes.telegram.FakeTelegram`) on this machine, runs the image's
default command (`lookout run`, as its unprivileged user) on the host's network with Telegram pointed at the fake,
waits for the bot to register its commands and for /healthz to answer 200, then runs the image's health check command
(`lookout healthcheck`, what its HEALTHCHECK runs) inside the container. Also runs `lookout run` with no platform
token and shows what it says; exits 1 when any of these is not so. Called by `bench/image.sh` (same PODMAN, IMAGE
and RUN_OPTS variables):

    PODMAN=podman IMAGE=localhost/lookout:bench uv run python bench/image_run.py
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fake_process import free_port  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

READY_SECONDS = 180.0
"""How long the service may take to answer /healthz in the container (migrations and imports on a loaded machine)."""


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def main() -> None:
    podman = shlex.split(os.environ.get("PODMAN", "podman"))
    image = os.environ.get("IMAGE", "localhost/lookout:bench")
    run_options = shlex.split(os.environ.get("RUN_OPTS", ""))

    with (ROOT / "bench" / "image_checks.py").open("rb") as checks:
        inside = subprocess.run(
            [*podman, "run", "--rm", "-i", "--read-only", *run_options, image, "python", "-"], stdin=checks, check=False
        )
    if inside.returncode != 0:
        raise SystemExit("a feature does not work inside the image (see above)")

    bare = subprocess.run(
        [*podman, "run", "--rm", *run_options, image, "lookout", "run"], capture_output=True, text=True, check=False
    )
    said = (bare.stdout + bare.stderr).strip().splitlines()
    print(f"`lookout run` with no token: exit {bare.returncode}: {said[-1] if said else '(nothing)'}")

    telegram = FakeTelegram()
    telegram.start()
    port = free_port()
    name = f"lookout-bench-{os.getpid()}"
    started = time.monotonic()
    subprocess.run(
        [*podman, "run", "-d", "--name", name, "--network", "host", *run_options,
         "-e", f"TELEGRAM_BOT_TOKEN={telegram.token}", "-e", f"TELEGRAM_API_URL={telegram.url}",
         "-e", "HTTP_HOST=127.0.0.1", "-e", f"HTTP_PORT={port}", "-e", "LOG_LEVEL=WARNING", image],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        status = None
        while time.monotonic() - started < READY_SECONDS:
            status = _status(f"http://127.0.0.1:{port}/healthz")
            if status == 200 and telegram.calls_to("setMyCommands"):
                break
            time.sleep(0.5)
        ready = time.monotonic() - started
        check = subprocess.run(
            [*podman, "exec", name, "lookout", "healthcheck"], capture_output=True, text=True, check=False
        )
        print(f"`lookout run` (Telegram on, fake Bot API): /healthz {status} after {ready:.1f} s, ", end="")
        print(f"bot commands registered: {bool(telegram.calls_to('setMyCommands'))}")
        answer = (check.stdout + check.stderr).strip()
        print(f"`lookout healthcheck` in the container: exit {check.returncode}: {answer}")
        if bare.returncode == 0 or status != 200 or check.returncode != 0:
            raise SystemExit("the image does not serve as it should (see above)")
    finally:
        subprocess.run([*podman, "rm", "-f", "-t", "10", name], check=False, capture_output=True)
        telegram.stop()


if __name__ == "__main__":
    main()
