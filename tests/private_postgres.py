"""A PostgreSQL server of a test's own, which it may stop and start: `initdb` into a temporary directory, a free port.

The shared server (TEST_DATABASE_URL) must never be stopped; a test that needs a database to go away and come back
starts one of these. The binaries are Debian's (`/usr/lib/postgresql/<version>/bin`); as root, every command runs
as the `postgres` user (PostgreSQL refuses to run as root), as `.ci/postgres.sh` does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PrivatePostgres", "postgres_binaries", "private_postgres"]

USER, PASSWORD, DATABASE = "lookout", "lookout", "postgres"


def postgres_binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None when there is none."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PrivatePostgres:
    """One running server: its data directory, its port, and stop/start as an operator would (pg_ctl)."""

    bin_dir: Path
    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of its database (asyncpg, no TLS)."""
        return f"postgresql+asyncpg://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, cwd="/", timeout=120)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.data_dir / "server.log"),
            "-o",
            f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off",
            "-w",
            "start",
        )

    def stop(self, *, mode: str = "fast") -> None:
        """Stop it as a restart or failover does: `fast` ends every session at once (`immediate`: a crash)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    def log(self) -> str:
        path = self.data_dir / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A new server (superuser `lookout`, its `postgres` database), stopped and deleted afterwards."""
    bin_dir = postgres_binaries()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    root = Path(tempfile.mkdtemp(prefix="lookout-pg-"))
    data_dir = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PrivatePostgres(bin_dir=bin_dir, data_dir=data_dir, port=_free_port())
    try:
        password_file = root / "password"
        password_file.write_text(PASSWORD)
        if os.geteuid() == 0:
            shutil.chown(password_file, "postgres", "postgres")
        server._run(
            "initdb",
            "-D",
            str(data_dir),
            "-U",
            USER,
            f"--pwfile={password_file}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        )
        server.start()
        yield server
    finally:
        if (data_dir / "postmaster.pid").exists():
            server.stop(mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


def wait_until_accepting(server: PrivatePostgres, *, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", server.port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"PostgreSQL on port {server.port} did not accept connections")
