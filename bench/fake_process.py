"""A benchmark's fake server in its own process: started on a free local port, waited for, stopped after.

The bench measures Lookout, so what it talks to runs apart from it (its CPU is not counted in Lookout's time)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["free_port", "serving"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(script: str, *args: str, ready: str) -> Iterator[str]:
    """Run `python script *args <port>` and yield its base URL once `ready` (a path) answers; terminate it after."""
    port = free_port()
    server = subprocess.Popen([sys.executable, script, *args, str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/{ready.lstrip('/')}", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait()
