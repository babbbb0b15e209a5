"""Slack: slash commands, mentions, DMs and buttons in as neutral messages; Block Kit and files out."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from bots.slack.api import build_web_client
    from bots.slack.frontend import CredentialsRefusedError, SlackFrontend
    from bots.slack.sender import SlackSender

__all__ = ["CredentialsRefusedError", "SlackFrontend", "SlackSender", "build_web_client"]

_SUBMODULE_OF = {
    "build_web_client": "api",
    "CredentialsRefusedError": "frontend",
    "SlackFrontend": "frontend",
    "SlackSender": "sender",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
