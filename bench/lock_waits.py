"""Lock waits in a PostgreSQL server log: how many, how long, and which statements waited.

    uv run python bench/lock_waits.py SERVER.log [--from-byte N] [--to-byte N] [--database PREFIX] [--by-database]

Reads what `log_lock_waits = on` writes (a wait is logged once it passes `deadlock_timeout`, then again when the
lock is acquired, with the time waited) and prints one table row per waiting statement (its first words): waits
logged, waits that ended in the lock, total and longest seconds waited, and the deadlocks detected. Needs the
server's `log_line_prefix` to carry the process id as `[%p]` (Debian's default does) and, for `--database`,
`%d` after `@` (`%q%u@%d`). `--from-byte`/`--to-byte` keep what one run wrote (`stat -c %s` before and after it);
`--by-database` prints one line per database instead (each bench/scale.py round has its own), in order of appearance.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"^\S+ \S+ \S+ \[(?P<pid>\d+)\] (?:\S*@(?P<db>\S*) )?(?P<level>[A-Z]+):\s+(?P<text>.*)$")
WAITING = re.compile(r"process \d+ still waiting for (?P<lock>.+?) after (?P<ms>[\d.]+) ms")
ACQUIRED = re.compile(r"process \d+ acquired (?P<lock>.+?) after (?P<ms>[\d.]+) ms")


@dataclass
class Waits:
    logged: int = 0
    acquired: int = 0
    seconds: float = 0.0
    longest: float = 0.0


def statement_key(statement: str) -> str:
    words = " ".join(statement.split())
    return words[:70]


def read(path: Path, *, start: int, end: int, database: str) -> tuple[dict[tuple[str, str], Waits], int]:
    """Waits by (database, statement), and the deadlocks detected."""
    waits: dict[tuple[str, str], Waits] = defaultdict(Waits)
    deadlocks = 0
    pending: dict[str, tuple[str, float]] = {}  # pid -> (what happened, ms) waiting for its STATEMENT line
    with path.open("rb") as log:
        log.seek(start)
        text = log.read((end - start) if end else -1).decode(errors="replace")
    for raw in text.splitlines():
        line = LINE.match(raw)
        if line is None:
            continue
        if database and not (line["db"] or "").startswith(database):
            continue
        pid, level, message = line["pid"], line["level"], line["text"]
        if level == "LOG" and (found := WAITING.match(message)):
            pending[pid] = ("waiting", 0.0)
        elif level == "LOG" and (found := ACQUIRED.match(message)):
            pending[pid] = ("acquired", float(found["ms"]))
        elif level == "ERROR" and message.startswith("deadlock detected"):
            deadlocks += 1
        elif level == "STATEMENT" and pid in pending:
            what, ms = pending.pop(pid)
            entry = waits[line["db"] or "", statement_key(message)]
            if what == "waiting":
                entry.logged += 1
            else:
                entry.acquired += 1
                entry.seconds += ms / 1000
                entry.longest = max(entry.longest, ms / 1000)
    return waits, deadlocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--from-byte", type=int, default=0)
    parser.add_argument("--to-byte", type=int, default=0)
    parser.add_argument("--database", default="", help="only databases whose name starts with this")
    parser.add_argument("--by-database", action="store_true")
    options = parser.parse_args()
    waits, deadlocks = read(options.log, start=options.from_byte, end=options.to_byte, database=options.database)
    if options.by_database:
        print("| database | statement | waits logged | seconds waited | longest |")
        print("|---|---|---|---|---|")
        for (name, key), entry in waits.items():  # in order of appearance
            print(f"| {name} | `{key[:40]}` | {entry.logged} | {entry.seconds:.1f} | {entry.longest:.2f} |")
    else:
        by_statement: dict[str, Waits] = defaultdict(Waits)
        for (_, key), entry in waits.items():
            merged = by_statement[key]
            merged.logged += entry.logged
            merged.acquired += entry.acquired
            merged.seconds += entry.seconds
            merged.longest = max(merged.longest, entry.longest)
        print("| statement | waits logged | acquired | seconds waited | longest |")
        print("|---|---|---|---|---|")
        for key, entry in sorted(by_statement.items(), key=lambda kv: -kv[1].seconds):
            print(f"| `{key}` | {entry.logged} | {entry.acquired} | {entry.seconds:.1f} | {entry.longest:.2f} |")
    total = sum(e.logged for e in waits.values())
    seconds = sum(e.seconds for e in waits.values())
    print(f"total: {total} waits logged, {seconds:.1f} s waited, {deadlocks} deadlocks")


if __name__ == "__main__":
    main()
