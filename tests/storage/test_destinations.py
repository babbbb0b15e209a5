"""The destinations table on SQLite and PostgreSQL: a destination and its chat made together, the failure streak
(told once per streak, ended by a success), the chats copying a briefing, and removal through its chat."""

from __future__ import annotations

from datetime import timedelta

from storage import ChatRecord, Database
from storage.repositories import ChatRepository, DestinationRepository
from tests.storage.conftest import T0


async def test_a_destination_is_a_chat_with_a_streak_and_a_briefing_copy(database: Database, chat: ChatRecord) -> None:
    destinations = DestinationRepository(database)
    record = await destinations.add(
        platform="webhook",
        external_id="d-1",
        kind="webhook",
        url="https://hooks.example.org/secret-path",
        secret="k" * 43,
        label="webhook+https://hooks.example.org/…",
        added_by_chat_id=chat.id,
        now=T0,
    )
    own_chat = await ChatRepository(database).get(record.chat_id)
    assert own_chat is not None and (own_chat.platform, own_chat.title) == ("webhook", record.label)
    assert (await destinations.of_chat(record.chat_id)) == record

    first = await destinations.record_failure(record.chat_id, error="HTTP 500", now=T0)
    second = await destinations.record_failure(record.chat_id, error="HTTP 502", now=T0 + timedelta(hours=1))
    assert first is not None and second is not None
    assert (first[1], second[1]) == (True, False)  # the adder is told once per streak
    assert second[0].failing_since == T0 and second[0].last_error == "HTTP 502"
    await destinations.record_success(record.chat_id)
    again = await destinations.record_failure(record.chat_id, error="HTTP 500", now=T0 + timedelta(days=1))
    assert again is not None and again[1] and again[0].failing_since == T0 + timedelta(days=1)

    assert await destinations.briefing_copies(chat.id) == []
    assert await destinations.set_briefing_of(record.id, chat.id)
    assert await destinations.briefing_copies(chat.id) == [record.chat_id]
    await ChatRepository(database).update(record.chat_id, active=False)  # paused
    assert await destinations.briefing_copies(chat.id) == []

    assert [d.id for d in await destinations.all(added_by_chat_id=chat.id)] == [record.id]
    assert await ChatRepository(database).delete(record.chat_id)
    assert await destinations.all() == []
