"""Who may talk to the bot: the ALLOWED_USERS / ALLOWED_CHATS allowlists and the ADMIN_USERS list.

Entries are the platforms' own ids, as strings: Telegram numeric user and chat ids (`123456789`,
`-1001234567890`), Slack user and channel ids (`U024BE7LH`, `C0123456`). An entry may carry a platform
prefix (`telegram:123456789`, `slack:U024BE7LH`) to match on that platform only; a bare entry matches the
id on any platform (ids of different platforms do not look alike, so this is rarely ambiguous).

With both allowlists empty the bot is open to everyone (quotas still apply; `lookout run` warns at start).
Admins are always allowed. The terminal chat is always allowed: whoever types there runs the process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.messages import Incoming

__all__ = ["DENIED_TEXT", "AccessPolicy"]

DENIED_TEXT = (
    "This bot is private. Ask its owner to add your user id ({user_id}) to ALLOWED_USERS "
    "or this chat's id ({chat_id}) to ALLOWED_CHATS."
)
"""The one reply a person outside the allowlists gets (in private chats only; see `bots.dispatcher`)."""

_PLATFORMS = ("telegram", "slack", "terminal")


def _entries(values: Iterable[str]) -> frozenset[tuple[str | None, str]]:
    """`(platform or None, id)` pairs from setting strings; blanks dropped, whitespace trimmed."""
    parsed: set[tuple[str | None, str]] = set()
    for raw in values:
        value = raw.strip()
        if not value:
            continue
        prefix, _, rest = value.partition(":")
        if rest and prefix.lower() in _PLATFORMS:
            parsed.add((prefix.lower(), rest.strip()))
        else:
            parsed.add((None, value))
    return frozenset(parsed)


@dataclass(frozen=True, init=False)
class AccessPolicy:
    """The access decision for one incoming message, from the three settings lists."""

    allowed_users: frozenset[tuple[str | None, str]]
    allowed_chats: frozenset[tuple[str | None, str]]
    admin_users: frozenset[tuple[str | None, str]]

    def __init__(
        self,
        *,
        allowed_users: Iterable[str] = (),
        allowed_chats: Iterable[str] = (),
        admin_users: Iterable[str] = (),
    ) -> None:
        object.__setattr__(self, "allowed_users", _entries(allowed_users))
        object.__setattr__(self, "allowed_chats", _entries(allowed_chats))
        object.__setattr__(self, "admin_users", _entries(admin_users))

    @property
    def open(self) -> bool:
        """No allowlist is configured: everyone may use the bot."""
        return not self.allowed_users and not self.allowed_chats

    def allows(self, incoming: Incoming) -> bool:
        """Whether this person, in this chat, may use the bot."""
        if self.open or incoming.platform == "terminal":
            return True
        return (
            _matches(self.allowed_users, incoming.platform, incoming.user_external_id)
            or _matches(self.allowed_chats, incoming.platform, incoming.chat_external_id)
            or self.is_admin(incoming)
        )

    def is_admin(self, incoming: Incoming) -> bool:
        """Whether this person is in ADMIN_USERS (may see and manage every chat's monitors)."""
        return _matches(self.admin_users, incoming.platform, incoming.user_external_id)

    def denied_text(self, incoming: Incoming) -> str:
        """What to tell a person who is not allowed: that the bot is private, and the ids to allow."""
        return DENIED_TEXT.format(user_id=incoming.user_external_id, chat_id=incoming.chat_external_id)


def _matches(entries: frozenset[tuple[str | None, str]], platform: str, external_id: str) -> bool:
    return (platform, external_id) in entries or (None, external_id) in entries
