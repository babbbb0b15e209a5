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

    def chat_allowed(
        self, platform: str, chat_external_id: str, *, user_external_id: str | None = None, is_private: bool = False
    ) -> bool:
        """Whether the chat itself is inside the allowlists, which browsing and subscribing need (digests of
        shared monitors must not reach a group merely because one allowed person is in it): the chat is in
        ALLOWED_CHATS; or it is a person's private chat and that person is allowed or an admin (a Telegram private
        chat has its person's id, so `telegram:<user id>` in ALLOWED_USERS also allows it without a user id)."""
        if self.open or platform == "terminal":
            return True
        if _matches(self.allowed_chats, platform, chat_external_id):
            return True
        person = user_external_id if is_private else None
        if person is None and platform == "telegram" and not chat_external_id.startswith("-"):
            person = chat_external_id  # Telegram: a private chat's id is its person's id; groups are negative
        if person is None:
            return False
        return _matches(self.allowed_users, platform, person) or _matches(self.admin_users, platform, person)

    def chat_of_allowed(self, incoming: Incoming) -> bool:
        """`chat_allowed` for the chat a message came from; an admin may act for any chat they write in."""
        return self.is_admin(incoming) or self.chat_allowed(
            incoming.platform,
            incoming.chat_external_id,
            user_external_id=incoming.user_external_id,
            is_private=incoming.is_private,
        )

    def is_admin(self, incoming: Incoming) -> bool:
        """Whether this person is in ADMIN_USERS (may see and manage every chat's monitors)."""
        return _matches(self.admin_users, incoming.platform, incoming.user_external_id)

    def denied_text(self, incoming: Incoming) -> str:
        """What to tell a person who is not allowed: that the bot is private, and the ids to allow."""
        return DENIED_TEXT.format(user_id=incoming.user_external_id, chat_id=incoming.chat_external_id)


def _matches(entries: frozenset[tuple[str | None, str]], platform: str, external_id: str) -> bool:
    return (platform, external_id) in entries or (None, external_id) in entries
