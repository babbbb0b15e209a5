"""A chat's own rules on a monitor it receives (owned or subscribed), for that chat only: shown, changed, cleared.

Guarantees: a chat reads and changes only its own rules, and only on a monitor it owns or receives; rules are checked
(`research.ReaderRules`: RE2 refuses a pattern, or it is too long) before anything is stored, so what is stored
always applies. Applying them is the delivery worker's (`monitors.delivery`, per chat at sending time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from research import ReaderRules, RuleKind
from storage import Database, ReaderRuleRepository

if TYPE_CHECKING:
    from monitors.service import MonitorService
    from monitors.views import MonitorView

__all__ = ["ReaderRuleService"]


class ReaderRuleService:
    """Rules per (monitor, chat); built by `MonitorService` (its `rules`)."""

    def __init__(self, service: MonitorService, database: Database) -> None:
        self._service = service
        self._rules = ReaderRuleRepository(database)

    async def of(self, monitor_id: int, *, chat_id: int) -> tuple[MonitorView, ReaderRules]:
        """The monitor as the chat sees it and the chat's rules on it (empty when none). Raises
        `MonitorNotFoundError` when the chat neither owns nor receives it (an admin too: rules are a reader's)."""
        view = await self._service.get_monitor(monitor_id, chat_id=chat_id)
        return view, ReaderRules.from_stored(await self._rules.get(monitor_id, chat_id)) or ReaderRules()

    async def change(
        self, monitor_id: int, *, chat_id: int, kind: RuleKind | None, values: Sequence[str] = (), clear: bool = False
    ) -> tuple[MonitorView, ReaderRules]:
        """Add `values` to `kind` (set, for `max` and `min-relevance`), or with `clear` remove them (every value of
        `kind` when none is given; every rule when `kind` is None too). Returns the rules now in force; raises
        `research.RuleError` (one sentence) for a value that cannot be a rule, leaving the stored rules as they were."""
        view, rules = await self.of(monitor_id, chat_id=chat_id)
        if clear:
            changed = ReaderRules() if kind is None else rules.removed(kind, values)
        else:
            assert kind is not None
            changed = rules.added(kind, values)
        await self._rules.put(monitor_id, chat_id, changed.stored() or None)
        return view, changed

    async def replace(self, monitor_id: int, *, chat_id: int, rules: ReaderRules) -> None:
        """Store `rules` as the chat's on the monitor (an import), without checking who the chat is to it."""
        await self._rules.put(monitor_id, chat_id, rules.stored() or None)

    async def stored(self, monitor_id: int, *, chat_id: int) -> ReaderRules | None:
        """The chat's rules on the monitor as stored (an export), None when it has none."""
        return ReaderRules.from_stored(await self._rules.get(monitor_id, chat_id))
