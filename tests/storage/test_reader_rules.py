"""Rules per reader in storage, on both backends: one row per (monitor, chat), replaced and removed; the listing
reads the asking chat's own rules in its one statement; a delivery row keeps what the rules left out."""

from __future__ import annotations

from storage import ChatRecord, Database, RunOutcome
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    MonitorRepository,
    ReaderRuleRepository,
    RunRepository,
    SubscriptionRepository,
)
from tests.storage.conftest import T0


async def test_rules_per_monitor_and_chat_are_replaced_listed_and_removed(database: Database, chat: ChatRecord) -> None:
    rules, monitors = ReaderRuleRepository(database), MonitorRepository(database)
    other = await ChatRepository(database).get_or_create("slack", "C1")
    first = await monitors.create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    second = await monitors.create(owner_chat_id=chat.id, topic="Mistral", schedule="daily")
    await SubscriptionRepository(database).subscribe(first.id, other.id)

    await rules.put(first.id, chat.id, {"include": ["ai"]})
    await rules.put(first.id, chat.id, {"exclude": ["celebrity"], "max_stories": 3})  # replaces
    await rules.put(first.id, other.id, {"regex": [r"\bGPT-?5\b"]})
    await rules.put(second.id, chat.id, {"block": ["example.com"]})
    await rules.put(second.id, chat.id, None)  # removes
    await rules.put(second.id, other.id, {})  # nothing to remove: no error

    assert await rules.get(first.id, chat.id) == {"exclude": ["celebrity"], "max_stories": 3}
    assert await rules.get(second.id, chat.id) is None
    assert await rules.of_chat(chat.id) == {first.id: {"exclude": ["celebrity"], "max_stories": 3}}
    assert await rules.of_chats([chat.id, other.id]) == {
        chat.id: {first.id: {"exclude": ["celebrity"], "max_stories": 3}},
        other.id: {first.id: {"regex": [r"\bGPT-?5\b"]}},
    }
    mine = {entry.monitor.id: entry.reader_rules for entry in await monitors.listing(chat.id)}
    theirs = {entry.monitor.id: entry.reader_rules for entry in await monitors.listing(other.id)}
    assert mine == {first.id: {"exclude": ["celebrity"], "max_stories": 3}, second.id: None}
    assert theirs == {first.id: {"regex": [r"\bGPT-?5\b"]}}
    one = await monitors.listing_of(first.id, other.id)
    assert one is not None and one.reader_rules == {"regex": [r"\bGPT-?5\b"]}
    await monitors.delete(first.id)
    assert await rules.of_chats([chat.id, other.id]) == {}  # they go with the monitor


async def test_a_delivery_row_keeps_what_the_rules_left_out(database: Database, chat: ChatRecord) -> None:
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    run = await RunRepository(database).open_run(monitor.id, T0)
    assert run is not None
    deliveries = DeliveryRepository(database)
    [row] = await deliveries.complete_run(run.id, outcome=RunOutcome(finished_at=T0))
    left_out = {"dropped": [{"title": "Chef", "numbers": [3], "rule": 'exclude "chef"'}], "removed": [3]}

    await deliveries.record_left_out(row.id, left_out)
    [stored] = await deliveries.list_for_run(run.id)
    await deliveries.record_left_out(row.id, None)
    [cleared] = await deliveries.list_for_run(run.id)

    assert row.left_out is None and stored.left_out == left_out and cleared.left_out is None
