"""`lookout run` as a real process: migrates, serves /healthz, says which frontends are off, stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_run_serves_health_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "HTTP_PORT": str(port),
        "TELEGRAM_BOT_TOKEN": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "LOG_LEVEL": "INFO",
    }
    script = Path(sys.executable).parent / "lookout"
    process = subprocess.Popen(
        [str(script), "run"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        health = None
        for _ in range(200):
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert health is not None, "the service never answered /healthz"
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "checks": {"database": "ok", "scheduler": "ok", "delivery": "ok"}}
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "telegram: on — delivering digests; chat commands come with the Telegram frontend" in output
    assert "scheduler: 0 monitor(s) scheduled" in output
    assert "slack: off — SLACK_BOT_TOKEN is not set" in output
    assert "anyone who finds the bot can use it" in output
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" not in output
    assert output.rstrip().endswith("stopped")
    assert (tmp_path / "data" / "lookout.db").exists()
