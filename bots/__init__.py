"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.markdown import parse_markdown, utf16_len
from bots.slack_render import blocks_payload, fallback_text, markdown_to_blocks, markdown_to_mrkdwn
from bots.telegram_render import (
    caption,
    caption_html,
    html_to_plain_text,
    markdown_to_telegram_html,
    split_telegram_html,
    split_telegram_text,
)
from bots.telegram_sender import TelegramSender

__all__ = [
    "TelegramSender",
    "blocks_payload",
    "caption",
    "caption_html",
    "fallback_text",
    "html_to_plain_text",
    "markdown_to_blocks",
    "markdown_to_mrkdwn",
    "markdown_to_telegram_html",
    "parse_markdown",
    "split_telegram_html",
    "split_telegram_text",
    "utf16_len",
]
