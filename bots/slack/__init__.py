"""Slack: slash commands, mentions, DMs and buttons in as neutral messages; Block Kit and files out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from bots.slack.api import build_web_client
    from bots.slack.frontend import CredentialsRefusedError, SlackFrontend
    from bots.slack.sender import SlackSender

__all__ = ["CredentialsRefusedError", "SlackFrontend", "SlackSender", "build_web_client"]

_SUBMODULES = {
    "api": ["build_web_client"],
    "frontend": ["CredentialsRefusedError", "SlackFrontend"],
    "sender": ["SlackSender"],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
