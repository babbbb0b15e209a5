"""Bot API calls of the Telegram sender: HTML with a plain-text fallback, files, and Telegram's errors mapped onto
the delivery errors (retry later, chat gone, chat moved)."""

from __future__ import annotations

import logging
import warnings
from datetime import timedelta
from typing import Literal, TypedDict

from telegram import Bot, InlineKeyboardMarkup, LinkPreviewOptions, Message
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError

from bots.telegram.render import html_to_plain_text, split_telegram_text
from kernel import ChatGone, ChatMoved, DeliveryError, RetryLater

__all__ = [
    "NO_PREVIEW",
    "FileKind",
    "delivery_error",
    "is_gone",
    "is_group",
    "retry_after_seconds",
    "send_file",
    "send_html",
]

logger = logging.getLogger(__name__)

_GONE_MARKERS = ("chat not found", "user is deactivated", "bot was kicked", "chat was deleted")
"""A 400 with one of these means the chat is gone for good, like a 403."""

NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
"""Digests and answers cite many links; a preview of whichever came first would only add noise."""

FileKind = Literal["document", "photo"]


async def send_html(
    bot: Bot,
    chat_id: str | int,
    part: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
    thread_id: int | None = None,
) -> None:
    """Send one HTML part (already within the length limit); if Telegram cannot parse it, send it as plain text."""
    try:
        await bot.send_message(
            chat_id,
            part,
            parse_mode=ParseMode.HTML,
            link_preview_options=NO_PREVIEW,
            reply_markup=reply_markup,
            message_thread_id=thread_id,
        )
    except BadRequest as error:
        if "can't parse entities" not in error.message.lower():
            raise
        logger.warning("Telegram could not parse a message part (%s); resending it as plain text", error.message)
        plain_parts = split_telegram_text(html_to_plain_text(part))
        for index, plain in enumerate(plain_parts):
            markup = reply_markup if index == len(plain_parts) - 1 else None
            await bot.send_message(
                chat_id, plain, link_preview_options=NO_PREVIEW, reply_markup=markup, message_thread_id=thread_id
            )


class _FileOptions(TypedDict):
    """What a file is sent with, whether it goes as a photo or as a document (the fallback sends the same)."""

    filename: str
    caption: str | None
    reply_markup: InlineKeyboardMarkup | None
    message_thread_id: int | None


async def send_file(
    bot: Bot,
    chat_id: str | int,
    *,
    content: bytes,
    filename: str,
    kind: FileKind,
    caption: str | None = None,
    reply_markup: InlineKeyboardMarkup | None = None,
    thread_id: int | None = None,
) -> Message:
    """Send a document (keeping its filename) or a photo; a photo Telegram refuses goes as a document."""
    options = _FileOptions(filename=filename, caption=caption, reply_markup=reply_markup, message_thread_id=thread_id)
    if kind == "photo":
        try:
            return await bot.send_photo(chat_id, photo=content, **options)
        except BadRequest as error:
            if is_gone(error):
                raise
            # Telegram refuses some images as photos (size, dimensions): the file still helps as a document.
            logger.warning("image refused as a photo (%s); sending it as a document", error.message)
    return await bot.send_document(chat_id, document=content, **options)


def delivery_error(error: TelegramError) -> DeliveryError:
    """What a Telegram error means for the message: `RetryLater` (429 with its wait, network errors, timeouts),
    `ChatGone` (403, chat not found), `ChatMoved` (a group became a supergroup) or a plain refusal."""
    if isinstance(error, RetryAfter):
        return RetryLater(str(error), retry_after=retry_after_seconds(error))
    if isinstance(error, ChatMigrated):
        return ChatMoved(str(error.new_chat_id), f"chat moved to {error.new_chat_id}")
    if isinstance(error, Forbidden):
        return ChatGone(error.message)
    if isinstance(error, BadRequest):  # BadRequest is a NetworkError subclass: it must come first
        if is_gone(error):
            return ChatGone(error.message)
        return DeliveryError(f"Telegram refused the message: {error.message}")
    if isinstance(error, NetworkError):  # includes TimedOut and 5xx answers
        return RetryLater(f"network error talking to Telegram: {error.message}")
    return DeliveryError(f"Telegram error: {error.message}")


def is_group(chat_id: str | int) -> bool:
    """Groups, supergroups and channels have negative ids (and share one 20-a-minute budget per chat)."""
    return str(chat_id).startswith("-")


def is_gone(error: BadRequest) -> bool:
    text = error.message.lower()
    return any(marker in text for marker in _GONE_MARKERS)


def retry_after_seconds(error: RetryAfter) -> float:
    with warnings.catch_warnings():  # python-telegram-bot warns that the attribute becomes a timedelta
        warnings.simplefilter("ignore")
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
