"""Scale-out: N monitors due at once, run and delivered by 1, 2 and 4 worker processes (JOB_QUEUE=procrastinate).

    TEST_DATABASE_URL=postgresql+asyncpg://… uv run python bench/scale.py [--monitors 1000] [--workers 1,2,4]
    TEST_DATABASE_URL=postgresql+asyncpg://… uv run python bench/scale.py --flood 3000 --workers 2 [--ceiling 30]

For each worker count: a throwaway PostgreSQL database, `--monitors` Telegram chats each owning one monitor on a
fake feed that answers after `--feed-delay` seconds, all made due at once and ticked. The fake feed and the
fake Bot API (Telegram's real ceiling: 30 messages/s, 1/s per chat) run in their own process. Printed per
worker count: runs per minute, seconds until every run finished and until every digest was delivered, CPU
seconds and peak RSS of each worker process (from /proc), jobs retried, and the 429s the fake sent.

`--flood N`: N one-message digests to separate chats against a fake that allows `--ceiling` messages a second
(Lookout's TELEGRAM_MAX_MESSAGES set to the same): the sustained send rate and its share of the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.cluster import LookoutProcess, running_cluster, wait_for  # noqa: E402
from tests.app.test_scale import make_all_due, runs_logged, seed_monitors  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def serve_fakes(feed_delay: float) -> None:
    """The fakes' own process: prints their URLs, then serves until stdin closes; prints Telegram's counts."""
    from tests.app.test_scale import FEED_PATH, feed_xml
    from tests.fakes.http_server import FakeResponse, running_fake_server
    from tests.fakes.telegram import RateLimit, running_fake_telegram

    with running_fake_server() as feed, running_fake_telegram(rate_limit=RateLimit()) as telegram:
        feed.route(
            "GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=feed_delay)
        )
        print(json.dumps({"feed": f"{feed.url}{FEED_PATH}", "telegram": telegram.url, "token": telegram.token}))
        sys.stdout.flush()
        sys.stdin.read()
        texts = [m for m in telegram.messages if m.kind == "text"]
        first = min((m.at for m in telegram.messages), default=0.0)
        last = max((m.at for m in telegram.messages), default=0.0)
        digests = {m.chat_id for m in texts if "monitor #" in (m.text or "")}
        print(
            json.dumps(
                {
                    "messages": len(telegram.messages),
                    "digest_chats": len(digests),
                    "throttled": telegram.throttled,
                    "send_seconds": last - first,
                }
            )
        )


def serve_flood_fake(ceiling: float) -> None:
    """The fake Bot API alone, enforcing `ceiling` messages/s overall (its own process); prints its counts."""
    from tests.fakes.telegram import RateLimit, running_fake_telegram

    with running_fake_telegram(rate_limit=RateLimit(per_second=ceiling, burst=ceiling)) as telegram:
        print(json.dumps({"telegram": telegram.url, "token": telegram.token}))
        sys.stdout.flush()
        sys.stdin.read()
        times = sorted(message.at for message in telegram.messages)
        print(json.dumps({"messages": len(times), "throttled": telegram.throttled, "times": times}))


def flood_round(admin_url: str, workers: int, digests: int, ceiling: float) -> dict[str, float]:
    """`digests` one-message digests to separate chats, `workers` workers, Lookout's limit set to the ceiling."""
    from tests.app.test_scale import seed_outbox

    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-flood-fake", "--ceiling", str(ceiling)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake.stdout is not None and fake.stdin is not None
    urls = json.loads(fake.stdout.readline())
    env = {
        "TELEGRAM_BOT_TOKEN": urls["token"],
        "TELEGRAM_API_URL": urls["telegram"],
        "TELEGRAM_MAX_MESSAGES": str(ceiling),
        "WORKER_CONCURRENCY": "32",
    }
    with TemporaryDirectory() as workdir, running_cluster(admin_url, Path(workdir), **env) as cluster:
        seed_outbox(cluster, group_digests=0, private_chats=digests)
        for _ in range(workers):
            cluster.start_healthy("worker")
        wait_for(
            lambda: cluster.scalar("SELECT count(*) FROM deliveries WHERE status = 'sent'") == digests,
            what="every digest",
            seconds=7200,
            every=1,
        )
    fake.stdin.close()
    counts = json.loads(fake.stdout.readline())
    fake.wait(timeout=30)
    times = counts["times"]
    # The steady part: without the first and last tenth (workers starting, the queue running dry).
    steady = times[len(times) // 10 : len(times) - len(times) // 10]
    rate = (len(steady) - 1) / (steady[-1] - steady[0])
    return {"rate": rate, "share": rate / ceiling, "throttled": counts["throttled"], "total_s": times[-1] - times[0]}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_round(admin_url: str, workers: int, monitors: int, feed_delay: float) -> dict[str, object]:
    fakes = subprocess.Popen(
        [sys.executable, __file__, "--serve-fakes", "--feed-delay", str(feed_delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fakes.stdout is not None and fakes.stdin is not None
    urls = json.loads(fakes.stdout.readline())
    env = {"TELEGRAM_BOT_TOKEN": urls["token"], "TELEGRAM_API_URL": urls["telegram"], "ALLOW_PRIVATE_URLS": "true"}
    with TemporaryDirectory() as workdir, running_cluster(admin_url, Path(workdir), **env) as cluster:
        seed_monitors(cluster, urls["feed"], monitors)
        processes: list[LookoutProcess] = [cluster.start_healthy("worker") for _ in range(workers)]
        cpu_before = {p.process.pid: cpu_seconds(p.process.pid) for p in processes}
        started = time.monotonic()
        make_all_due(cluster)
        wait_for(
            lambda: cluster.scalar("SELECT count(DISTINCT monitor_id) FROM runs WHERE status <> 'running'") == monitors,
            what="every run",
            seconds=7200,
            every=1,
        )
        runs_done = time.monotonic() - started
        wait_for(
            lambda: cluster.scalar("SELECT count(*) FROM deliveries WHERE status IN ('pending', 'failed')") == 0,
            what="every digest",
            seconds=7200,
            every=1,
        )
        delivered = time.monotonic() - started
        cpu = [cpu_seconds(p.process.pid) - cpu_before[p.process.pid] for p in processes]
        rss = [peak_rss_mib(p.process.pid) for p in processes]
        retried = cluster.scalar(
            "SELECT count(*) FROM procrastinate_events WHERE type IN ('deferred_for_retry', 'retried')"
        )
        succeeded = cluster.scalar("SELECT count(*) FROM runs WHERE status = 'succeeded'")
        shares = [runs_logged(p.log()) for p in processes]
    fakes.stdin.close()
    counts = json.loads(fakes.stdout.readline())
    fakes.wait(timeout=30)
    return {
        "workers": workers,
        "runs_per_minute": monitors / runs_done * 60,
        "runs_done_s": runs_done,
        "delivered_s": delivered,
        "cpu_s": cpu,
        "peak_rss_mib": rss,
        "retried": retried,
        "succeeded": succeeded,
        "runs_per_worker": shares,
        **counts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--monitors", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--feed-delay", type=float, default=0.2)
    parser.add_argument("--flood", type=int, default=0, help="instead: this many digests to separate chats")
    parser.add_argument("--ceiling", type=float, default=30.0, help="with --flood: messages/s the fake allows")
    parser.add_argument("--serve-fakes", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-flood-fake", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fakes:
        serve_fakes(options.feed_delay)
        return
    if options.serve_flood_fake:
        serve_flood_fake(options.ceiling)
        return
    admin_url = os.environ.get("TEST_DATABASE_URL")
    if not admin_url:
        sys.exit("Set TEST_DATABASE_URL=postgresql+asyncpg://… (a role that may create databases).")
    if options.flood:
        print(f"{options.flood} one-message digests to separate chats; the fake allows {options.ceiling:.0f}/s")
        print("| workers | sustained messages/s | share of the ceiling | 429s | first to last message |")
        print("|---|---|---|---|---|")
        for workers in (int(n) for n in options.workers.split(",")):
            flood = flood_round(admin_url, workers, options.flood, options.ceiling)
            print(
                f"| {workers} | {flood['rate']:.1f} | {flood['share']:.0%} | {flood['throttled']:.0f} "
                f"| {flood['total_s']:.0f} s |",
                flush=True,
            )
        return
    print(
        f"{options.monitors} monitors due at once, feed answering after {options.feed_delay * 1000:.0f} ms; "
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        "| workers | runs/min | all runs done | all digests delivered | CPU s per worker | peak RSS MiB per worker "
        "| runs per worker | jobs retried | 429s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for workers in (int(n) for n in options.workers.split(",")):
        result = one_round(admin_url, workers, options.monitors, options.feed_delay)
        assert result["succeeded"] == options.monitors and result["digest_chats"] == options.monitors, result
        cpu = ", ".join(f"{value:.0f}" for value in result["cpu_s"])  # type: ignore[attr-defined]
        rss = ", ".join(f"{value:.0f}" for value in result["peak_rss_mib"])  # type: ignore[attr-defined]
        shares = ", ".join(str(value) for value in result["runs_per_worker"])  # type: ignore[attr-defined]
        print(
            f"| {workers} | {result['runs_per_minute']:.0f} | {result['runs_done_s']:.0f} s "
            f"| {result['delivered_s']:.0f} s | {cpu} | {rss} | {shares} | {result['retried']} "
            f"| {result['throttled']} |",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
