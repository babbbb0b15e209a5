"""Telegram updates (as the Bot API sends them) to neutral `Incoming`s: what is for the bot, and what it said."""

from __future__ import annotations

from typing import Any

from telegram import Update

from bots.telegram.updates import BotIdentity, migration, received_from_update

BOT = BotIdentity(id=123456, username="lookout_test_bot")
PRIVATE = {"id": 42, "type": "private", "first_name": "Alice"}
GROUP = {"id": -100777, "type": "supergroup", "title": "Research team"}
ALICE = {"id": 42, "is_bot": False, "first_name": "Alice", "last_name": "Liddell"}


def update(text: str, *, chat: dict[str, Any] = PRIVATE, update_id: int = 10, **extra: Any) -> Update:
    message = {"message_id": 5, "date": 1_763_640_000, "chat": chat, "from": ALICE, "text": text, **extra}
    return Update.de_json({"update_id": update_id, "message": message}, None)


def mention(text: str, at: int) -> list[dict[str, Any]]:
    return [{"type": "mention", "offset": at, "length": len("@lookout_test_bot")}]


def test_a_private_message_is_for_the_bot() -> None:
    received = received_from_update(update("what's new?", update_id=77), BOT)
    assert received is not None
    incoming = received.incoming
    assert (incoming.platform, incoming.chat_external_id, incoming.user_external_id) == ("telegram", "42", "42")
    assert (incoming.text, incoming.event_id, incoming.message_id) == ("what's new?", "77", "5")
    assert incoming.is_private and incoming.addressed_to_bot and incoming.user_display_name == "Alice Liddell"
    assert incoming.chat_title is None and incoming.thread_key == ""


def test_group_chatter_is_not_for_the_bot_but_mentions_replies_and_commands_are() -> None:
    assert received_from_update(update("lunch?", chat=GROUP), BOT) is None

    text = "hey @Lookout_Test_Bot, what about 🦊 news?"
    received = received_from_update(update(text, chat=GROUP, entities=mention(text, 4)), BOT)
    assert received is not None
    assert received.incoming.text == "hey what about 🦊 news?" and received.incoming.mentions_bot
    assert received.incoming.chat_title == "Research team" and not received.incoming.is_private

    # The mention's offset counts UTF-16 units: an emoji before it is two.
    text = "🦊 @lookout_test_bot track this"
    received = received_from_update(update(text, chat=GROUP, entities=mention(text, 3)), BOT)
    assert received is not None and received.incoming.text == "🦊 track this"

    bot_message = {"message_id": 4, "date": 1_763_640_000, "chat": GROUP, "text": "Done.", "from": {
        "id": BOT.id, "is_bot": True, "first_name": "Lookout", "username": BOT.username}}  # fmt: skip
    received = received_from_update(update("and more?", chat=GROUP, reply_to_message=bot_message), BOT)
    assert received is not None and received.incoming.reply_to_bot and received.incoming.text == "and more?"

    other = {**bot_message, "from": {"id": 9, "is_bot": False, "first_name": "Bob"}}
    assert received_from_update(update("and more?", chat=GROUP, reply_to_message=other), BOT) is None


def test_commands_for_this_bot_lose_the_address_and_other_bots_commands_are_ignored() -> None:
    received = received_from_update(update("/track@lookout_test_bot DeepSeek daily", chat=GROUP), BOT)
    assert received is not None and received.incoming.text == "/track DeepSeek daily"
    assert received_from_update(update("/track@other_bot DeepSeek", chat=GROUP), BOT) is None
    received = received_from_update(update("/monitors", chat=GROUP), BOT)
    assert received is not None and received.incoming.text == "/monitors"


def test_forum_topics_are_threads() -> None:
    received = received_from_update(
        update("/monitors", chat={**GROUP, "is_forum": True}, message_thread_id=9, is_topic_message=True), BOT
    )
    assert received is not None and received.thread_id == 9 and received.incoming.thread_key == "9"


def test_a_button_press_carries_its_data_and_label() -> None:
    keyboard = {"inline_keyboard": [[{"text": "Yes, do it", "callback_data": "c:abc"}]]}
    message = {"message_id": 8, "date": 1, "chat": PRIVATE, "text": "Create it?", "reply_markup": keyboard}
    query = {"id": "q1", "from": ALICE, "chat_instance": "ci", "message": message, "data": "c:abc"}
    received = received_from_update(Update.de_json({"update_id": 11, "callback_query": query}, None), BOT)
    assert received is not None and received.callback_query_id == "q1" and received.message_id == 8
    incoming = received.incoming
    assert (incoming.text, incoming.callback_data, incoming.event_id) == ("Yes, do it", "c:abc", "11")
    assert incoming.addressed_to_bot


def test_what_is_not_a_persons_text_is_skipped() -> None:
    sticker = Update.de_json(
        {"update_id": 1, "message": {"message_id": 1, "date": 1, "chat": PRIVATE, "from": ALICE}}, None
    )
    assert received_from_update(sticker, BOT) is None
    from_bot = {"message_id": 1, "date": 1, "chat": PRIVATE, "text": "hi", "from": {**ALICE, "is_bot": True}}
    assert received_from_update(Update.de_json({"update_id": 2, "message": from_bot}, None), BOT) is None


def test_a_group_upgrade_is_a_migration() -> None:
    moved = {"message_id": 1, "date": 1, "chat": {"id": -555, "type": "group", "title": "T"}, "from": ALICE,
             "migrate_to_chat_id": -100555}  # fmt: skip
    assert migration(Update.de_json({"update_id": 3, "message": moved}, None)) == ("-555", "-100555")
    assert migration(update("hi")) is None


def test_forged_updates_are_read_or_dropped_never_raised(caplog: Any) -> None:
    nameless = {"id": 42, "is_bot": False, "first_name": ""}
    message = {"message_id": 5, "date": 1_763_640_000, "chat": PRIVATE, "from": nameless, "text": "hi"}
    press = {"id": "cb1", "chat_instance": "ci", "data": "confirm:abc", "message": {**message, "from": ALICE}}

    read = received_from_update(Update.de_json({"update_id": 1, "message": message}, None), BOT)
    dropped = received_from_update(Update.de_json({"update_id": 2, "callback_query": press}, None), BOT)

    assert read is not None and read.incoming.text == "hi" and read.incoming.user_display_name is None
    assert dropped is None
    assert [r.getMessage() for r in caplog.records] == ["update 2: a button press with no sender; dropped"]
