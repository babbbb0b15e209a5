"""Slack: slash commands, mentions, DMs and buttons in as neutral messages; Block Kit and files out."""

from bots.slack.api import build_web_client
from bots.slack.frontend import CredentialsRefusedError, SlackFrontend
from bots.slack.sender import SlackSender

__all__ = ["CredentialsRefusedError", "SlackFrontend", "SlackSender", "build_web_client"]
