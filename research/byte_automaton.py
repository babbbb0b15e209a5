"""py3langid's feature automaton held as its trie and failure links rather than as a dense table of next states.

py3langid finds the byte n-grams of a text it weighs with an Aho-Corasick automaton stored dense: one row of 256 next
states per distinct row of the automaton (38,346 rows of 4-byte states: 37 MB), and each state's row offset as a
Python int (4 MB more). The same automaton is a trie, one edge into each of its 104,583 states, plus one failure link
per state: about 2 MB. On a byte without an edge out of the current state the walk follows failure links until one
has it (or the root, which stays put), which is the next state the dense table holds.

Guarantee: `SparseAutomaton.from_dense` checks that equivalence for every state and byte while it builds (the dense
row of each state equals its failure state's row on every byte without an edge, and the root's is 0 there), and
returns None when the table is not such an automaton, so the caller keeps the dense one; `visits` then counts the
same features in the same text as py3langid's own `visit_counts`.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["SparseAutomaton"]

CHUNK_STATES = 4096
"""States whose dense rows are looked at together while building (4 MB of rows at a time, not the whole table)."""


class SparseAutomaton:
    """A byte automaton as trie edges (per state, the bytes of its edges and where they lead) and failure links."""

    __slots__ = ("_fail", "_labels", "_offsets", "_outputs", "_targets")

    def __init__(self, offsets: array[int], labels: bytes, targets: array[int], fail: array[int], outputs: Any) -> None:
        self._offsets = offsets
        self._labels = labels
        self._targets = targets
        self._fail = fail
        self._outputs = outputs

    @classmethod
    def from_dense(cls, nextmove: array[int], rows: Sequence[int], outputs: Any) -> SparseAutomaton | None:
        """The automaton py3langid holds as `tk_nextmove` (distinct 256-entry rows), `tk_row` (each state's row) and
        `tk_output` (each state's feature, or -1), or None if that table is not a trie with failure links."""
        import numpy as np

        table = np.frombuffer(nextmove, dtype=np.dtype(f"u{nextmove.itemsize}")).reshape(-1, 256)
        row_of = np.asarray(rows, dtype=np.int64)
        states = len(row_of)
        if states == 0 or len(outputs) != states:
            return None

        def chunks(selected: Any) -> Any:
            for start in range(0, len(selected), CHUNK_STATES):
                part = selected[start : start + CHUNK_STATES]
                yield part, table[row_of[part]]

        # Depth of each state: a state at depth d is first reached after d bytes (its own string).
        depth = np.full(states, -1, dtype=np.int64)
        depth[0] = 0
        frontier = np.zeros(1, dtype=np.int64)
        level = 0
        while frontier.size:
            level += 1
            reached = np.zeros(states, dtype=bool)
            for _, nexts in chunks(frontier):
                reached[nexts.ravel()] = True
            frontier = np.nonzero(reached & (depth < 0))[0]
            depth[frontier] = level
        if (depth < 0).any():
            return None
        # Trie edges: a byte that leads one level deeper; exactly one into every state but the root.
        sources, labels, targets = [], [], []
        for part, nexts in chunks(np.arange(states)):
            edge = depth[nexts] == depth[part][:, None] + 1
            row, byte = np.nonzero(edge)
            sources.append(part[row])
            labels.append(byte)
            targets.append(nexts[row, byte])
        source, label, target = np.concatenate(sources), np.concatenate(labels), np.concatenate(targets)
        if len(target) != states - 1 or len(np.unique(target)) != states - 1:
            return None
        parent = np.zeros(states, dtype=np.int64)
        parent[target] = source
        byte_in = np.zeros(states, dtype=np.int64)
        byte_in[target] = label
        # Failure links, level by level: a child's is where its parent's failure state goes on the child's byte.
        fail = np.zeros(states, dtype=np.int64)
        for deeper in range(2, level):
            at = np.nonzero(depth == deeper)[0]
            fail[at] = table[row_of[fail[parent[at]]], byte_in[at]]
        # The check: off the trie edges, each state moves as its failure state does (the root stays at 0).
        for part, nexts in chunks(np.arange(states)):
            fallback = table[row_of[fail[part]]]
            fallback[part == 0] = 0
            edge = depth[nexts] == depth[part][:, None] + 1
            if not ((nexts == fallback) | edge).all():
                return None
        offsets = np.searchsorted(source, np.arange(states + 1)).astype(np.uint32)
        return cls(
            array("I", offsets.tobytes()),
            label.astype(np.uint8).tobytes(),
            array("I", target.astype(np.uint32).tobytes()),
            array("I", fail.astype(np.uint32).tobytes()),
            outputs,
        )

    def visits(self, text: bytes) -> Counter[int] | None:
        """How many times each feature occurs in `text` (py3langid's `visit_counts`), or None when none does."""
        offsets, labels, targets, fail, outputs = self._offsets, self._labels, self._targets, self._fail, self._outputs
        state = 0
        found: list[int] = []
        append = found.append
        for byte in text:
            while True:
                start, end = offsets[state], offsets[state + 1]
                if start != end:
                    position = labels.find(byte, start, end)
                    if position >= 0:
                        state = targets[position]
                        break
                if state == 0:
                    break
                state = fail[state]
            feature = outputs[state]
            if feature >= 0:
                append(feature)
        return Counter(found) if found else None
