"""Usage totals, inbound de-duplication and stored HTTP validators."""

from __future__ import annotations

from datetime import date, timedelta

from storage import ChatRecord, Database, UsageEntry, UsageTotals
from storage.repositories import (
    ChatRepository,
    ConversationRepository,
    EmbeddingRepository,
    HttpValidatorRepository,
    InboundRepository,
    TurnRepository,
    UsageRepository,
)
from tests.storage.conftest import T0


async def test_usage_adds_up_per_day_and_month(database: Database, chat: ChatRecord) -> None:
    usage = UsageRepository(database)
    other = await ChatRepository(database).get_or_create("slack", "C1")
    assert await usage.for_day(chat.id, date(2026, 3, 1)) == UsageTotals()

    await usage.add(chat.id, date(2026, 3, 1), UsageEntry(kind="chat", input_tokens=1000, output_tokens=200, cost=0.01))
    await usage.add(
        chat.id, date(2026, 3, 1), UsageEntry(kind="chat", requests=2, input_tokens=500, output_tokens=50, cost=0.005)
    )
    await usage.add(chat.id, date(2026, 3, 31), UsageEntry(kind="chat", input_tokens=10))
    await usage.add(chat.id, date(2026, 4, 1), UsageEntry(kind="chat", input_tokens=99_999))
    await usage.add(chat.id, date(2026, 2, 28), UsageEntry(kind="chat", input_tokens=99_999))
    await usage.add(other.id, date(2026, 3, 1), UsageEntry(kind="chat", input_tokens=7))

    day = await usage.for_day(chat.id, date(2026, 3, 1))
    assert (day.requests, day.input_tokens, day.output_tokens) == (3, 1500, 250)
    assert abs(day.cost - 0.015) < 1e-9
    month = await usage.for_month(chat.id, 2026, 3)
    assert (month.requests, month.input_tokens) == (4, 1510)
    assert (await usage.for_day(other.id, date(2026, 3, 1))).input_tokens == 7


async def test_usage_is_kept_per_kind_and_added_up_across_kinds(database: Database, chat: ChatRecord) -> None:
    usage = UsageRepository(database)
    day = date(2026, 3, 1)
    await usage.add(chat.id, day, UsageEntry(kind="chat", requests=1, input_tokens=100, output_tokens=10, cost=0.5))
    await usage.add(chat.id, day, UsageEntry(kind="memory", requests=1, input_tokens=40, output_tokens=4))
    await usage.add(chat.id, day, UsageEntry(kind="chat", requests=1, input_tokens=100, output_tokens=10))
    await usage.add(chat.id, day, UsageEntry(kind="embedding", requests=1, input_tokens=7))

    kinds = await usage.by_kind(chat.id, day, day)
    assert kinds == {
        "chat": UsageTotals(requests=2, input_tokens=200, output_tokens=20, cost=0.5),
        "memory": UsageTotals(requests=1, input_tokens=40, output_tokens=4, cost=0.0),
        "embedding": UsageTotals(requests=1, input_tokens=7, output_tokens=0, cost=0.0),
    }
    assert await usage.for_day(chat.id, day) == UsageTotals(requests=4, input_tokens=247, output_tokens=24, cost=0.5)


async def test_usage_month_boundaries_in_december(database: Database, chat: ChatRecord) -> None:
    usage = UsageRepository(database)
    await usage.add(chat.id, date(2026, 12, 31), UsageEntry(kind="chat", input_tokens=5))
    await usage.add(chat.id, date(2027, 1, 1), UsageEntry(kind="chat", input_tokens=50))
    assert (await usage.for_month(chat.id, 2026, 12)).input_tokens == 5
    assert (await usage.for_month(chat.id, 2027, 1)).input_tokens == 50


async def test_inbound_ids_are_new_once(database: Database) -> None:
    inbound = InboundRepository(database)
    assert await inbound.seen_before("telegram", "1001", now=T0) is False
    assert await inbound.seen_before("telegram", "1001", now=T0) is True
    assert await inbound.seen_before("slack", "1001", now=T0) is False  # ids are per platform
    assert await inbound.seen_before("slack", "Ev0123", now=T0 + timedelta(days=2)) is False

    assert await inbound.forget_before(T0 + timedelta(days=1)) == 2
    assert await inbound.seen_before("telegram", "1001") is False  # forgotten, so new again
    assert await inbound.seen_before("slack", "Ev0123") is True


async def test_http_validators_round_trip_and_replace(database: Database) -> None:
    validators = HttpValidatorRepository(database)
    url = "https://example.org/feed.xml?" + "q=deepseek&" * 400  # longer than an index key may be
    assert await validators.get(url) is None

    await validators.put(
        url,
        etag='W/"abc"',
        last_modified="Sun, 01 Mar 2026 09:00:00 GMT",
        body=b"<rss/>",
        content_type="application/rss+xml; charset=utf-8",
        now=T0,
    )
    stored = await validators.get(url)
    assert stored is not None
    assert (stored.url, stored.etag, stored.last_modified, stored.body, stored.content_type, stored.updated_at) == (
        url,
        'W/"abc"',
        "Sun, 01 Mar 2026 09:00:00 GMT",
        b"<rss/>",
        "application/rss+xml; charset=utf-8",
        T0,
    )

    await validators.put(url, etag=None, last_modified=None, body=None, now=T0 + timedelta(hours=1))
    replaced = await validators.get(url)
    assert replaced is not None and (replaced.etag, replaced.body) == (None, None)
    assert await validators.get("https://example.org/other") is None

    assert await validators.delete(url) is True
    assert await validators.get(url) is None
    assert await validators.delete(url) is False


async def test_embeddings_are_stored_once_by_key_and_read_back(database: Database) -> None:
    embeddings = EmbeddingRepository(database)
    assert await embeddings.get_many(["a", "b"]) == {}
    await embeddings.put_many({"a": [0.25, -1.5, 3.0], "b": [1.0, 0.0, 0.0]}, model="google:gemini-embedding-001")
    await embeddings.put_many({"a": [9.0, 9.0, 9.0], "c": [0.5, 0.5, 0.5]}, model="google:gemini-embedding-001")
    found = await embeddings.get_many(["a", "b", "c", "missing"])
    assert found == {"a": [0.25, -1.5, 3.0], "b": [1.0, 0.0, 0.0], "c": [0.5, 0.5, 0.5]}, (
        "a stored key keeps its vector"
    )
    assert await embeddings.count() == 3
    many = {f"k{n}": [float(n)] for n in range(1200)}
    await embeddings.put_many(many, model="m")
    assert len(await embeddings.get_many(list(many))) == 1200, "reads and writes go in chunks"


async def test_a_turns_finish_writes_the_memory_and_adds_every_entry_once(database: Database, chat: ChatRecord) -> None:
    """On PostgreSQL one statement (the memory and the usage data-modifying CTEs of it), on SQLite one transaction:
    entries of one kind all count, and a stale revision keeps the memory out but never the usage."""
    turns, usage, conversations = TurnRepository(database), UsageRepository(database), ConversationRepository(database)
    day = date(2026, 3, 1)
    spent = [
        UsageEntry(kind="chat", input_tokens=100, output_tokens=10, cost=0.001),
        UsageEntry(kind="chat", requests=2, input_tokens=50, output_tokens=5, cost=0.002),
        UsageEntry(kind="summary", input_tokens=7),
        UsageEntry(kind="tool", requests=0),  # nothing spent: not written
    ]
    revision = await turns.finish(
        chat.id, "", now=T0, day=day, changes={"messages": b"m1", "summary": "s", "touch": True}, usage=spent
    )
    assert revision == 1
    stored = await conversations.load(chat.id)
    assert stored is not None and (stored.messages, stored.summary, stored.revision) == (b"m1", "s", 1)
    kinds = await usage.by_kind(chat.id, day, day)
    assert set(kinds) == {"chat", "summary"}
    assert (kinds["chat"].requests, kinds["chat"].input_tokens, kinds["chat"].output_tokens) == (3, 150, 15)
    assert abs(kinds["chat"].cost - 0.003) < 1e-9 and kinds["summary"].input_tokens == 7

    stale = await turns.finish(
        chat.id, "", now=T0, day=day, changes={"messages": b"m2"}, usage=spent[:1], if_revision=0
    )
    assert stale is None and (await conversations.load(chat.id)).messages == b"m1"  # type: ignore[union-attr]
    assert (await usage.by_kind(chat.id, day, day))["chat"].input_tokens == 250  # counted all the same
    assert await turns.finish(chat.id, "", now=T0, day=day, changes={"told_no_model": True}, if_revision=1) == 2
    assert await turns.finish(chat.id, "", now=T0, day=day, usage=spent[2:3]) is None
    assert (await usage.by_kind(chat.id, day, day))["summary"].input_tokens == 14
    assert await turns.finish(chat.id, "", now=T0, day=day) is None  # nothing to write
