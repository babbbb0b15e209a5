"""The access policy: allowlists by the platforms' own ids, optional platform prefixes, admins, open mode."""

from __future__ import annotations

from agent.access import AccessPolicy
from agent.messages import Incoming, Platform


def incoming(platform: Platform, user: str, chat: str | None = None) -> Incoming:
    return Incoming(platform=platform, chat_external_id=chat or user, user_external_id=user, is_private=chat is None)


def test_without_allowlists_everyone_may_talk_but_nobody_is_admin() -> None:
    policy = AccessPolicy()
    assert policy.open
    assert policy.allows(incoming("telegram", "123"))
    assert policy.allows(incoming("slack", "U999", "C1"))
    assert not policy.is_admin(incoming("telegram", "123"))


def test_users_and_chats_are_matched_on_the_platforms_ids() -> None:
    policy = AccessPolicy(allowed_users=[" 123 ", "U024BE7LH", ""], allowed_chats=["-1001234567890"])
    assert not policy.open
    assert policy.allows(incoming("telegram", "123"))
    assert policy.allows(incoming("slack", "U024BE7LH", "C0123"))
    assert policy.allows(incoming("telegram", "555", "-1001234567890"))  # anyone in an allowed group
    assert not policy.allows(incoming("telegram", "555"))
    assert not policy.allows(incoming("telegram", "1234"))  # exact ids, not prefixes
    assert not policy.allows(incoming("slack", "U024BE7LX", "C0123"))


def test_prefixed_entries_match_one_platform_only() -> None:
    policy = AccessPolicy(allowed_users=["telegram:42", "Slack:U7"])
    assert policy.allows(incoming("telegram", "42"))
    assert not policy.allows(incoming("slack", "42", "C1"))
    assert policy.allows(incoming("slack", "U7", "C1"))
    assert not policy.allows(incoming("telegram", "U7"))


def test_admins_are_allowed_and_flagged() -> None:
    policy = AccessPolicy(allowed_users=["1"], admin_users=["telegram:99", "U5"])
    assert policy.allows(incoming("telegram", "99")) and policy.is_admin(incoming("telegram", "99"))
    assert policy.is_admin(incoming("slack", "U5", "C1"))
    assert not policy.is_admin(incoming("slack", "99", "C1"))
    assert not policy.is_admin(incoming("telegram", "1"))


def test_the_terminal_is_always_allowed_and_the_denial_names_the_ids() -> None:
    policy = AccessPolicy(allowed_users=["1"])
    assert policy.allows(incoming("terminal", "local", "terminal"))
    text = policy.denied_text(incoming("telegram", "777", "-42"))
    assert text.startswith("This bot is private.") and "777" in text and "-42" in text
