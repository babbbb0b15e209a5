"""Several real `lookout run` processes on one throwaway PostgreSQL database (JOB_QUEUE=procrastinate).

`Cluster` starts processes in a role with a shared environment, each with its own HTTP port and log file, and
gives the test the database to seed and inspect. Used by the scale-out tests and by bench/scale.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
from sqlalchemy import text

from storage import Database
from tests.backends import throwaway_postgres

_T = TypeVar("_T")
LOOKOUT = Path(sys.executable).parent / "lookout"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(predicate: Callable[[], bool], *, what: str, seconds: float = 60, every: float = 0.1) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {seconds:.0f} s waiting for {what}"
        time.sleep(every)


def throwaway_database(admin_url: str) -> AbstractContextManager[str]:
    """A new, migrated PostgreSQL database, dropped afterwards (with any connection a killed process left)."""
    return throwaway_postgres(admin_url, prefix="lookout_scale", migrate=True)


@dataclass
class LookoutProcess:
    """One `lookout run --role …` subprocess, its HTTP port and its log."""

    name: str
    role: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        try:
            return httpx.get(self.health_url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as when a machine or the OOM killer takes it."""
        self.process.kill()
        self.process.wait(timeout=10)

    def terminate(self, *, timeout: float = 60) -> int:
        """SIGTERM, then wait for the clean exit; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


@dataclass
class Cluster:
    """Processes sharing one database and one environment (see the module docstring)."""

    database_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: list[LookoutProcess] = field(default_factory=list)

    def start(
        self, role: str, *, name: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> LookoutProcess:
        name = name or f"{role}{sum(p.role == role for p in self.processes) + 1}"
        port = free_port()
        log_path = self.workdir / f"{name}.log"
        inherited = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
        env = {
            **inherited,  # bytecode is written once, so each process does not compile every module again
            "DATABASE_URL": self.database_url,
            "JOB_QUEUE": "procrastinate",
            "DATA_DIR": str(self.workdir / "data"),
            "HTTP_PORT": str(port),
            "LOG_LEVEL": "INFO",
            "GEMINI_API_KEY": "",
            "LLM_MODEL": "",
            **self.env,
            **(extra_env or {}),
        }
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [str(LOOKOUT), "run", "--role", role], env=env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT
            )
        started = LookoutProcess(name=name, role=role, port=port, log_path=log_path, process=process)
        self.processes.append(started)
        return started

    def start_healthy(self, role: str, **options: object) -> LookoutProcess:
        started = self.start(role, **options)  # type: ignore[arg-type]
        wait_for(lambda: started.healthy() or not started.alive(), what=f"{started.name} to be healthy", seconds=180)
        assert started.alive(), started.log()
        return started

    def stop_all(self) -> None:
        for process in self.processes:
            if process.alive():
                process.process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.process.kill()
                process.process.wait(timeout=10)

    def query(self, work: Callable[[Database], Awaitable[_T]]) -> _T:
        """Run `work` against the cluster's database from the test (its own short-lived engine)."""

        async def run() -> _T:
            database = Database(self.database_url)
            try:
                return await work(database)
            finally:
                await database.dispose()

        return asyncio.run(run())

    def scalar(self, sql: str, **params: object) -> object:
        async def work(database: Database) -> object:
            async with database.engine.connect() as connection:
                return (await connection.execute(text(sql), params)).scalar()

        return self.query(work)


@contextmanager
def running_cluster(admin_url: str, workdir: Path, **env: str) -> Iterator[Cluster]:
    with throwaway_database(admin_url) as url:
        cluster = Cluster(database_url=url, workdir=workdir, env=dict(env))
        try:
            yield cluster
        finally:
            cluster.stop_all()
