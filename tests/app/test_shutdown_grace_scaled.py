"""SIGTERM to a real `lookout run --role worker` (JOB_QUEUE=procrastinate, PostgreSQL) in the middle of slow work
(issue #30): the process exits within SHUTDOWN_GRACE_SECONDS, counted from the signal, and nothing is lost.

- A run slower than the grace: procrastinate's worker gets what is left of the grace for the job under way (not the
  whole grace again), hands the job back, and another worker finishes the run: one run, one digest.
- A delivery whose send is slower than the grace: the part in flight is cut short at the deadline; another worker
  sends the rest, at most that part twice.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.app.cluster import LookoutProcess, running_cluster, wait_for
from tests.app.test_scale import (
    FEED_PATH,
    _part,
    admin_url,
    digests_per_chat,
    feed_xml,
    make_all_due,
    seed_monitors,
    start_one_run,
    telegram_env,
    wait_until_sent,
)
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.telegram import running_fake_telegram

pytestmark = pytest.mark.postgres

__all__ = ["admin_url"]  # the fixture, shared with test_scale

GRACE = 6.0
"""SHUTDOWN_GRACE_SECONDS of the worker under test: procrastinate alone used to wait all of it for the job."""
SLOWER_THAN_GRACE = 4.5
"""Seconds the Bot API takes to answer each send in the delivery case, with a grace of `SHORT_GRACE`."""
SHORT_GRACE = 4.0


def stopped_within(process: LookoutProcess) -> float:
    """SIGTERM, then the seconds until the process exited (cleanly)."""
    signalled = time.monotonic()
    assert process.terminate(timeout=120) == 0, process.log()
    return time.monotonic() - signalled


def test_sigterm_during_a_run_slower_than_the_grace_exits_within_it_and_the_run_is_finished_once(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=60))
    with running_fake_telegram() as telegram:
        env = {**telegram_env(telegram), "SHUTDOWN_GRACE_SECONDS": str(GRACE)}
        with running_cluster(admin_url, tmp_path, **env) as cluster:
            first = start_one_run(cluster, fake_server)
            seconds = stopped_within(first)
            waiting = cluster.scalar(
                "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'lookout.run_monitor' AND status = 'todo'"
            )
            fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml"))
            second = cluster.start_healthy("worker")
            wait_until_sent(cluster, 1, what="the digest of the run handed back")
            runs = cluster.scalar("SELECT count(*) FROM runs")
            status = cluster.scalar("SELECT status FROM runs")
            assert second.terminate() == 0, second.log()
        print(f"a run slower than the grace: grace {GRACE:.0f} s, exited {seconds:.1f} s after SIGTERM")
        assert seconds <= GRACE, f"exited {seconds:.1f} s after SIGTERM\n{first.log()[-3000:]}"
        assert waiting == 1, first.log()[-3000:]  # handed back at the deadline, not failed
        assert runs == 1 and status == "succeeded"
        assert digests_per_chat(telegram) == Counter({"1001": 1})


def test_sigterm_during_a_send_slower_than_the_grace_exits_within_it_and_loses_nothing(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml"))
    with running_fake_telegram(answer_delay=SLOWER_THAN_GRACE) as telegram:
        env = {
            **telegram_env(telegram),
            "SHUTDOWN_GRACE_SECONDS": str(SHORT_GRACE),
            "WORKER_HEARTBEAT_SECONDS": "1",
            "DELIVERY_LEASE_SECONDS": "5",
        }
        with running_cluster(admin_url, tmp_path, **env) as cluster:
            seed_monitors(cluster, f"{fake_server.url}{FEED_PATH}", 1)
            first = cluster.start_healthy("worker")
            make_all_due(cluster)
            wait_for(lambda: len(telegram.sent(1001)) >= 1, what="the digest's first part", seconds=180)
            time.sleep(0.3)  # its answer is 4 s away
            seconds = stopped_within(first)
            before = [_part(message) for message in telegram.sent(1001)]
            telegram.answer_delay = 0.05
            second = cluster.start_healthy("worker")
            wait_until_sent(cluster, 1, what="the rest of the digest")
            assert second.terminate() == 0, second.log()
        received = [_part(message) for message in telegram.sent(1001)]
    print(f"a send slower than the grace: grace {SHORT_GRACE:.0f} s, exited {seconds:.1f} s after SIGTERM")
    assert seconds <= SHORT_GRACE, f"exited {seconds:.1f} s after SIGTERM\n{first.log()[-3000:]}"
    counts = Counter(received)
    assert set(received) >= {("document", "csv"), ("photo", "png")}  # every part arrived
    assert len(before) == 1  # the stop came while the first part was in flight
    assert max(counts.values()) <= 2 and [p for p, n in counts.items() if n > 1] in ([], before)
    assert received[:1] == before
