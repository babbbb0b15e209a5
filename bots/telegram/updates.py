"""Telegram updates as neutral `Incoming` messages: who wrote where, whether it is for the bot, mention stripped.

Private chats: every text message, and a message without text (a sticker, a voice note) so that the bot can say it
reads text. Groups: commands (`/x`, or `/x@thisbot`; `/x@otherbot` is someone else's),
messages that @-mention the bot and replies to the bot's messages; other chatter is not for us. Button presses
(callback queries) become an `Incoming` whose text is the pressed button's label and `callback_data` its data.
Forum topics are threads: memory is kept per topic and replies go to the topic.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pydantic import ValidationError
from telegram import CallbackQuery, Chat, Document, InlineKeyboardMarkup, Message, MessageEntity, Update, User
from telegram.constants import ChatType

from agent import Incoming

__all__ = ["BotIdentity", "Received", "migration", "received_from_update"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BotIdentity:
    """Who the bot is (from getMe), to recognise mentions of it and replies to it."""

    id: int
    username: str
    """Without the leading @."""


@dataclass(frozen=True, kw_only=True)
class Received:
    """An update that is for the bot, with what the frontend needs to answer it."""

    incoming: Incoming
    thread_id: int | None = None
    """The forum topic to answer in (Telegram's message_thread_id), None outside topics."""
    callback_query_id: str | None = None
    """Set for a button press: the query to answer (stops the button's spinner)."""
    message_id: int | None = None
    """The message the update is about (for a button press: the message carrying the buttons)."""
    document: Document | None = None
    """A document sent with `/import` (as its caption, or `/import` replying to it): the frontend downloads it."""
    keyboard: InlineKeyboardMarkup | None = None
    """For a button press: the pressed message's buttons, so the answer can acknowledge the press in its row."""


def received_from_update(update: Update, bot: BotIdentity) -> Received | None:
    """The neutral message for an update, or None when the update is not for the bot (or not a kind we read).

    Never raises: an update however malformed (forged, or from a Bot API version we do not know) is dropped
    with one log line, and the next one is read as usual.
    """
    try:
        if update.callback_query is not None:
            return _from_callback(update.update_id, update.callback_query)
        if update.message is not None:
            return _from_message(update.update_id, update.message, bot)
    except ValidationError as error:  # e.g. a field beyond our limits: skip the update, keep serving
        logger.warning("update %d could not be read (%s); dropped", update.update_id, error.errors()[0]["msg"])
    except Exception as error:  # a malformed update must never reach the dispatcher's caller as a traceback
        logger.warning("update %d is malformed (%s: %s); dropped", update.update_id, type(error).__name__, error)
    return None


def migration(update: Update) -> tuple[str, str] | None:
    """`(old chat id, new chat id)` when the update says a group became a supergroup: in the old group
    (`migrate_to_chat_id`) or as the first message of the new supergroup (`migrate_from_chat_id`). Telegram sends
    both; the first one read moves the chat, before anyone's message in the supergroup is answered."""
    message = update.message
    if message is None:
        return None
    if message.migrate_to_chat_id is not None:
        return str(message.chat.id), str(message.migrate_to_chat_id)
    if message.migrate_from_chat_id is not None:
        return str(message.migrate_from_chat_id), str(message.chat.id)
    return None


def _from_message(update_id: int, message: Message, bot: BotIdentity) -> Received | None:
    text = message.text if message.text is not None else message.caption
    user = message.from_user
    if user is None or user.is_bot:  # channel posts, other bots
        return None
    is_private = message.chat.type == ChatType.PRIVATE
    # A sticker or a voice note in a private chat is for the bot, which says it reads text; in a group it is
    # people talking among themselves. Service messages (someone joined, a pinned message) are nobody's question.
    unreadable = _unreadable(message) if text is None and is_private else None
    if text is None and unreadable is None:
        return None
    text = text or ""
    is_command = text.startswith("/")
    if is_command:
        addressed = _address_command(text, bot)
        if addressed is None:
            return None  # a command for another bot in the group
        text = addressed
    mentions_bot = _mentions(message, bot)
    replied = message.reply_to_message
    reply_to_bot = replied is not None and replied.from_user is not None and replied.from_user.id == bot.id
    if not (is_private or is_command or mentions_bot or reply_to_bot):
        return None
    if mentions_bot and not is_command:
        text = _strip_mention(text, bot)
    thread_id = message.message_thread_id if message.is_topic_message else None
    document = _document_to_import(message, text)
    incoming = Incoming(
        platform="telegram",
        chat_external_id=str(message.chat.id),
        user_external_id=str(user.id),
        thread_key=str(thread_id) if thread_id is not None else "",
        text=text,
        message_id=str(message.message_id),
        event_id=str(update_id),
        is_private=is_private,
        mentions_bot=mentions_bot,
        reply_to_bot=reply_to_bot,
        user_display_name=_display_name(user),
        chat_title=_title(message.chat),
        unreadable=unreadable,
    )
    return Received(incoming=incoming, thread_id=thread_id, message_id=message.message_id, document=document)


_UNREADABLE = (
    ("sticker", "a sticker"),
    ("voice", "a voice message"),
    ("video_note", "a video message"),
    ("audio", "an audio file"),
    ("animation", "a GIF"),
    ("photo", "a photo"),
    ("video", "a video"),
    ("document", "a file"),
    ("location", "a location"),
    ("contact", "a contact"),
    ("poll", "a poll"),
    ("dice", "a dice roll"),
)
"""A message's content fields with no text of their own and what the bot calls them when it cannot read them
(`animation` before `document`: Telegram sets both for a GIF; `venue` carries a `location` too)."""


def _unreadable(message: Message) -> str | None:
    """What a message without text carries, in words; None for service messages (joins, pins, title changes)."""
    return next((name for field, name in _UNREADABLE if getattr(message, field, None)), None)


def _document_to_import(message: Message, text: str) -> Document | None:
    """The document an `/import` is about: the one it is the caption of, or the one it replies to."""
    words = text.split(maxsplit=1)
    if not words or words[0].lower() != "/import":
        return None
    if message.document is not None:
        return message.document
    replied = message.reply_to_message
    return replied.document if replied is not None else None


def _from_callback(update_id: int, query: CallbackQuery) -> Received | None:
    message = query.message
    if message is None or query.data is None:  # inline-mode buttons and games are not ours
        return None
    # Typed as always there (Telegram always names who pressed), but a forged update can leave it out.
    presser: User | None = getattr(query, "from_user", None)
    if presser is None:
        logger.warning("update %d: a button press with no sender; dropped", update_id)
        return None
    chat = message.chat
    label = query.data
    if isinstance(message, Message) and message.reply_markup is not None:
        for row in message.reply_markup.inline_keyboard:
            for button in row:
                if button.callback_data == query.data:
                    label = button.text
    is_topic = isinstance(message, Message) and message.is_topic_message
    thread_id = message.message_thread_id if isinstance(message, Message) and is_topic else None
    incoming = Incoming(
        platform="telegram",
        chat_external_id=str(chat.id),
        user_external_id=str(presser.id),
        thread_key=str(thread_id) if thread_id is not None else "",
        text=label,
        message_id=str(message.message_id),
        event_id=str(update_id),
        callback_data=query.data,
        is_private=chat.type == ChatType.PRIVATE,
        user_display_name=_display_name(presser),
        chat_title=_title(chat),
    )
    keyboard = message.reply_markup if isinstance(message, Message) else None
    return Received(
        incoming=incoming,
        thread_id=thread_id,
        callback_query_id=query.id,
        message_id=message.message_id,
        keyboard=keyboard,
    )


_COMMAND = re.compile(r"/(?P<name>[A-Za-z0-9_]+)(?:@(?P<addressee>[A-Za-z0-9_]+))?")


def _address_command(text: str, bot: BotIdentity) -> str | None:
    """A `/command` text with a `@thisbot` address removed; None when it is addressed to another bot."""
    match = _COMMAND.match(text)
    if match is None or match["addressee"] is None:
        return text
    if match["addressee"].lower() != bot.username.lower():
        return None
    return f"/{match['name']}{text[match.end() :]}"


def _mentions(message: Message, bot: BotIdentity) -> bool:
    entities = message.parse_entities() if message.text is not None else message.parse_caption_entities()
    for entity, content in entities.items():
        if entity.type == MessageEntity.MENTION and content[1:].lower() == bot.username.lower():
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot.id:
            return True
    return False


def _strip_mention(text: str, bot: BotIdentity) -> str:
    """ "@lookout_bot, what's new?" → "what's new?" (newlines kept)."""
    pattern = re.compile(rf"(?<![\w@])@{re.escape(bot.username)}\b[,:]?", re.IGNORECASE)
    stripped = pattern.sub("", text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def _display_name(user: User) -> str | None:
    """The person's name as Telegram shows it; None when there is none (a forged or odd update can have an empty
    first name, which python-telegram-bot turns into no full name at all)."""
    name = user.full_name or user.username or ""
    return name[:256] if isinstance(name, str) and name else None


def _title(chat: Chat) -> str | None:
    if chat.type == ChatType.PRIVATE:
        return None
    return (chat.title or "")[:256] or None
