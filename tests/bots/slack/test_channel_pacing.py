"""Posts to one Slack channel from several processes share one pace through slots in the database."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

from bots.slack.api import build_web_client
from storage import Database, upgrade_database
from storage.repositories import RateSlotRepository
from tests.fakes.slack import running_fake_slack


async def test_two_clients_posting_to_one_channel_keep_its_pace(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'slots.db'}"
    await upgrade_database(url)
    database = Database(url)
    slots = RateSlotRepository(database)  # what every process's client shares
    arrivals: dict[str, list[float]] = {"C1": [], "C2": []}
    with running_fake_slack() as slack:
        # Two clients, as two worker processes would have, both pacing through the same slots.
        clients = [
            build_web_client(slack.token, api_url=slack.api_url, channel_slots=slots, channel_interval=0.25)
            for _ in range(2)
        ]

        async def post(client_index: int, channel: str, n: int) -> None:
            await clients[client_index].chat_postMessage(channel=channel, text=f"{channel} message {n}")
            arrivals[channel].append(time.monotonic())

        await asyncio.gather(*(post(n % 2, "C1", n) for n in range(6)), *(post(n % 2, "C2", n) for n in range(2)))
        posted = slack.messages_in("C1")
    await database.dispose()
    assert len(posted) == 6
    gaps = [later - earlier for earlier, later in itertools.pairwise(sorted(arrivals["C1"]))]
    assert min(gaps) > 0.2, gaps  # one channel: about one post per interval, whichever client posts
    # Another channel has a pace of its own: both its posts went out at once, not after C1's queue.
    assert max(arrivals["C2"]) < sorted(arrivals["C1"])[2]
