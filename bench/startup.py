"""How long `lookout --help` and `lookout monitors list` take to answer, against `python -c pass` in the same run.

Each command runs in a fresh process, interleaved round by round so that the machine's load weighs on all of them
alike; a throwaway DATA_DIR holds a SQLite database migrated by an untimed first run and one monitor, so
`monitors list` reads and draws one entry. Prints the median and the fastest wall time, the ratio to
`python -c pass`, and the CPU time (user + system), which the machine's load changes much less than wall time.
A "floor" row imports only what `monitors list` cannot do without (the CLI's typer and rich, pydantic-settings,
SQLAlchemy's async engine and ORM, aiosqlite), and the last column gives each command's CPU time against it.

    uv run python bench/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"lookout --help": 1.0, "lookout monitors list": 1.5}
"""Seconds of wall time the issue sets (#28)."""
FLOOR = "floor: imports monitors list needs"
FLOOR_IMPORTS = (
    "import asyncio, typer, rich.console, pydantic_settings, sqlalchemy.ext.asyncio, sqlalchemy.orm, aiosqlite"
)
"""What any command that reads the database and prints must import."""


def _lookout(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("lookout")), *args]


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "DATA_DIR": data, "TELEGRAM_BOT_TOKEN": "", "SLACK_BOT_TOKEN": ""}
        env.pop("DATABASE_URL", None)
        subprocess.run(
            _lookout("monitors", "add", "DeepSeek", "--chat", "telegram:1", "--schedule", "daily at 9"),
            env=env,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            FLOOR: [sys.executable, "-c", FLOOR_IMPORTS],
            "lookout --help": _lookout("--help"),
            "lookout monitors list": _lookout("monitors", "list"),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, argv in commands.items():
                wall, used = _time(argv, env)
                times[name].append(wall)
                cpu[name].append(used)
    baseline = statistics.median(times["python -c pass"])
    floor = statistics.median(cpu[FLOOR])
    print(f"{rounds} rounds, interleaved; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print()
    print(
        "| command | wall, median | wall, fastest | × python -c pass (median) | CPU, median | CPU × floor "
        "| target (wall) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        target = f"≤ {TARGETS[name]:.1f} s" if name in TARGETS else "–"
        used = statistics.median(cpu[name])
        print(
            f"| {name} | {median:.3f} s | {min(values):.3f} s | {median / baseline:.1f} "
            f"| {used:.3f} s | {used / floor:.2f} | {target} |"
        )


if __name__ == "__main__":
    main()
