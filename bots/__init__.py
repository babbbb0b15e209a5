"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.console import ConsoleSender, TerminalChat, run_terminal_chat
from bots.dispatcher import Deliver, Dispatcher
from bots.markdown import parse_markdown, utf16_len
from bots.slack_frontend import SlackFrontend
from bots.slack_render import blocks_payload, fallback_text, markdown_to_blocks, markdown_to_mrkdwn, reply_messages
from bots.slack_sender import SlackSender
from bots.telegram_bot import TelegramFrontend, TelegramOptions
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
    "ConsoleSender",
    "Deliver",
    "Dispatcher",
    "SlackFrontend",
    "SlackSender",
    "TelegramFrontend",
    "TelegramOptions",
    "TelegramSender",
    "TerminalChat",
    "blocks_payload",
    "caption",
    "caption_html",
    "fallback_text",
    "html_to_plain_text",
    "markdown_to_blocks",
    "markdown_to_mrkdwn",
    "markdown_to_telegram_html",
    "parse_markdown",
    "reply_messages",
    "run_terminal_chat",
    "split_telegram_html",
    "split_telegram_text",
    "utf16_len",
]
