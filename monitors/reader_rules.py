"""A chat's own rules on a monitor it receives (owned or subscribed), for that chat only: shown, changed, cleared,
and what they keep of a shared run's digest (`rules_view`, the one decision every path to a chat takes: the
delivery worker for a message per run, the briefing for its sections).

Guarantees: a chat reads and changes only its own rules, and only on a monitor it owns or receives; rules are checked
(`research.ReaderRules`: RE2 refuses a pattern, or it is too long) before anything is stored, so what is stored
always applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from monitors.runner import item_of_record
from research import ReaderRules, RuleKind, RulesDecision, RunEntry, apply_rules, digest_stories
from storage import Database, ItemWithScores
from storage.repositories import ReaderRuleRepository

if TYPE_CHECKING:
    from monitors.catalogue import MonitorCatalogue
    from monitors.views import MonitorView
    from research import Digest

__all__ = ["ReaderRuleService", "rules_view", "run_entries"]


def rules_view(digest: Digest, entries: Sequence[RunEntry], rules: ReaderRules | None) -> RulesDecision | None:
    """What one reader keeps of a shared run's digest (None: all of it): the chat's rules over the digest's stories,
    each story found among the run's `entries`. Pure; the one place a chat's rules are decided (its
    feedback then chooses among what is left: `research.reader_view`)."""
    if rules is None or rules.empty:
        return None
    return apply_rules(digest_stories(digest, entries), rules)


def run_entries(stored: Sequence[ItemWithScores]) -> list[RunEntry]:
    """A run's stored items with their stories and relevance, as the rules read them (items that no longer
    validate are skipped)."""
    entries = []
    for scored in stored:
        item = item_of_record(scored.item)
        if item is not None:
            entries.append(RunEntry(item=item, cluster_id=scored.scores.cluster_id, relevance=scored.scores.relevance))
    return entries


class ReaderRuleService:
    """Rules per (monitor, chat); `MonitorService.rules`, built in `app` over the catalogue."""

    def __init__(self, service: MonitorCatalogue, database: Database) -> None:
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
