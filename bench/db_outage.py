"""The database goes away and comes back under real `lookout run` processes: what was lost, repeated, how long to
recover.

    uv run python bench/db_outage.py [--chats 100] [--outages 10,60] [--workers 2] [--sqlite-lock 10]

For each outage length: a PostgreSQL server of the bench's own (initdb into a temporary directory; needs the
server binaries under /usr/lib/postgresql, and root or the postgres user), one web process (Telegram long polling
against the fake Bot API) and `--workers` worker processes (JOB_QUEUE=procrastinate). Every chat writes once, a
monitor falls due, the server is stopped (`pg_ctl stop -m fast`) for the outage while every chat writes again
(three rounds), then started. Then one pass on SQLite: one embedded process, the file's write lock held by another
writer for `--sqlite-lock` seconds while the chats write. The scenario is tests/app/outage.py (also the test's).

Printed per pass: messages sent, lost (never answered), repeated (answered more than once), runs and digests of
the monitor due during the outage (PostgreSQL only), seconds from the database's return until every process
answered /healthz with 200 and until every message was answered. The fakes run in this process, on threads of
their own: at 100 chats and a few hundred messages they are not the bound (recovery is measured in seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.outage import Outcome, postgres_restart, run_outage, sqlite_locked  # noqa: E402
from tests.fakes.http_server import running_fake_server  # noqa: E402
from tests.fakes.telegram import running_fake_telegram  # noqa: E402
from tests.private_postgres import private_postgres  # noqa: E402


def postgres_pass(*, chats: int, outage: float, workers: int) -> Outcome:
    with (
        tempfile.TemporaryDirectory(prefix="lookout-outage-") as workdir,
        private_postgres() as server,
        running_fake_telegram() as telegram,
        running_fake_server() as feeds,
    ):
        return run_outage(
            postgres_restart(server),
            telegram,
            feeds,
            Path(workdir),
            chats=chats,
            outage_seconds=outage,
            workers=workers,
        )


def sqlite_pass(*, chats: int, outage: float) -> Outcome:
    with (
        tempfile.TemporaryDirectory(prefix="lookout-outage-") as workdir,
        running_fake_telegram() as telegram,
        running_fake_server() as feeds,
    ):
        path = Path(workdir) / "lookout.db"
        return run_outage(sqlite_locked(path), telegram, feeds, Path(workdir), chats=chats, outage_seconds=outage)


def row(label: str, outcome: Outcome) -> str:
    runs = f"{outcome.runs} / {outcome.digests}" if label.startswith("PostgreSQL") else "–"
    return (
        f"| {label} | {outcome.messages} | {outcome.lost} | {outcome.repeated} | {runs} | "
        f"{_seconds(outcome.healthy_after)} | {_seconds(outcome.answered_after)} |"
    )


def _seconds(value: float) -> str:
    return "never" if value < 0 else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--outages", default="10,60", help="seconds the PostgreSQL server is away, comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--sqlite-lock", type=float, default=10.0, help="seconds the SQLite write lock is held; 0: skip"
    )
    parser.add_argument("--logs", type=Path, help="write each process's log here")
    arguments = parser.parse_args()
    lines = [
        "| pass | messages | lost | repeated | due runs / digests | healthy after (s) | all answered after (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    passes: list[tuple[str, Outcome]] = []
    for seconds in (float(value) for value in arguments.outages.split(",") if value):
        label = f"PostgreSQL stopped {seconds:.0f} s, 1 web + {arguments.workers} workers, {arguments.chats} chats"
        print(f"running: {label}", file=sys.stderr, flush=True)
        passes.append((label, postgres_pass(chats=arguments.chats, outage=seconds, workers=arguments.workers)))
    if arguments.sqlite_lock > 0:
        label = f"SQLite locked {arguments.sqlite_lock:.0f} s by another writer, 1 process, {arguments.chats} chats"
        print(f"running: {label}", file=sys.stderr, flush=True)
        passes.append((label, sqlite_pass(chats=arguments.chats, outage=arguments.sqlite_lock)))
    for label, outcome in passes:
        lines.append(row(label, outcome))
        if arguments.logs is not None:
            arguments.logs.mkdir(parents=True, exist_ok=True)
            for name, log in outcome.logs.items():
                (arguments.logs / f"{label.split(',')[0].replace(' ', '_')}_{name}.log").write_text(log)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
