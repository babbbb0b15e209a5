"""Chats, users and conversation memory through their repositories."""

from __future__ import annotations

from datetime import timedelta

from storage import ChatRecord, Database
from storage.repositories import ChatRepository, ConversationRepository, MonitorRepository
from storage.repositories.users import UserRepository
from tests.storage.conftest import T0


async def test_chat_is_created_once_and_found_again(database: Database) -> None:
    chats = ChatRepository(database)
    first = await chats.get_or_create("telegram", "-100200", title="Team")
    again = await chats.get_or_create("telegram", "-100200", title="ignored on the second call")
    other_platform = await chats.get_or_create("slack", "-100200")

    assert again == first
    assert other_platform.id != first.id
    assert (first.platform, first.external_id, first.title, first.timezone, first.active) == (
        "telegram",
        "-100200",
        "Team",
        "UTC",
        True,
    )
    assert await chats.get(first.id) == first
    assert await chats.find("telegram", "-100200") == first
    assert await chats.find("telegram", "nope") is None
    assert await chats.get(10_000) is None


async def test_chat_settings_update_and_listing(database: Database) -> None:
    chats = ChatRepository(database)
    chat = await chats.get_or_create("telegram", "1")
    await chats.get_or_create("slack", "C9")

    updated = await chats.update(
        chat.id, timezone="Asia/Shanghai", language="zh", profile="We build LLM tools.", title="Me"
    )
    assert updated is not None
    assert (updated.timezone, updated.language, updated.profile, updated.title) == (
        "Asia/Shanghai",
        "zh",
        "We build LLM tools.",
        "Me",
    )
    assert await chats.get(chat.id) == updated

    # A Telegram group migrated to a supergroup keeps its row under the new id.
    migrated = await chats.update(chat.id, external_id="-100999")
    assert migrated is not None and migrated.external_id == "-100999"
    assert await chats.find("telegram", "1") is None

    await chats.update(chat.id, active=False)
    assert [c.external_id for c in await chats.list_chats()] == ["-100999", "C9"]
    assert [c.external_id for c in await chats.list_chats(active_only=True)] == ["C9"]
    assert [c.external_id for c in await chats.list_chats(platform="telegram")] == ["-100999"]
    assert await chats.update(10_000, title="x") is None


async def test_deleting_a_chat_removes_its_monitors_and_memory(database: Database, chat: ChatRecord) -> None:
    chats, monitors, conversations = (
        ChatRepository(database),
        MonitorRepository(database),
        ConversationRepository(database),
    )
    monitor = await monitors.create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily at 09:00")
    await conversations.save(chat.id, messages=b"[]", summary=None)

    assert await chats.delete(chat.id) is True
    assert await chats.delete(chat.id) is False
    assert await chats.get(chat.id) is None
    assert await monitors.get(monitor.id) is None
    assert await conversations.load(chat.id) is None


async def test_users_are_created_once_and_keep_a_display_name(database: Database) -> None:
    users = UserRepository(database)
    alice = await users.get_or_create("telegram", "42", display_name="Alice")
    assert (alice.platform, alice.external_id, alice.display_name) == ("telegram", "42", "Alice")

    renamed = await users.get_or_create("telegram", "42", display_name="Alice B.")
    assert renamed.id == alice.id and renamed.display_name == "Alice B."
    unnamed = await users.get_or_create("telegram", "42")
    assert unnamed.display_name == "Alice B."

    assert await users.get(alice.id) == unnamed
    assert await users.find("telegram", "42") == unnamed
    assert await users.find("slack", "42") is None
    assert await users.delete(alice.id) is True
    assert await users.get(alice.id) is None
    assert await users.delete(alice.id) is False


async def test_conversation_memory_is_saved_replaced_and_cleared(database: Database, chat: ChatRecord) -> None:
    conversations = ConversationRepository(database)
    assert await conversations.load(chat.id) is None

    first = await conversations.save(chat.id, messages=b'[{"kind":"request"}]', summary=None, now=T0)
    assert (first.messages, first.summary, first.created_at, first.updated_at) == (
        b'[{"kind":"request"}]',
        None,
        T0,
        T0,
    )

    later = T0 + timedelta(minutes=5)
    second = await conversations.save(chat.id, messages=b"[2]", summary="They asked about DeepSeek.", now=later)
    assert second.id == first.id
    assert (second.messages, second.summary, second.created_at, second.updated_at) == (
        b"[2]",
        "They asked about DeepSeek.",
        T0,
        later,
    )
    assert await conversations.load(chat.id) == second

    # Threads are separate conversations.
    thread = await conversations.save(chat.id, "thread-1", messages=b"[3]", summary=None)
    assert thread.id != first.id
    assert (await conversations.load(chat.id, "thread-1")) == thread

    assert await conversations.clear(chat.id) is True
    assert await conversations.load(chat.id) is None
    assert await conversations.load(chat.id, "thread-1") == thread
    assert await conversations.clear(chat.id) is False


async def test_large_binary_history_round_trips(database: Database, chat: ChatRecord) -> None:
    payload = bytes(range(256)) * 4000  # ~1 MB, every byte value
    conversations = ConversationRepository(database)
    await conversations.save(chat.id, messages=payload, summary="s")
    loaded = await conversations.load(chat.id)
    assert loaded is not None and loaded.messages == payload
