"""Tunes Python's cyclic garbage collector for a long-running Lookout process, once, after start-up.

Guarantees: nothing becomes uncollectable by it — cyclic garbage is still found, only after more allocations;
what is alive once the process is assembled (modules, classes, pydantic schemas, the app's objects) lives until
exit anyway, so the collector stops scanning it.

Why: every chat turn (a pydantic-ai run, PTB objects, aiohttp requests) allocates thousands of container objects,
so with CPython's default thresholds a young collection runs every turn or two and each full collection walks the
whole start-up heap, a pause every chat waits through; with the start-up heap frozen (`gc.freeze`) and a higher
young threshold, collections are rare and none is a full one (`bench/chat.py` measures the CPU per turn). A
one-shot command (`lookout research`, the terminal chat) does not need it.
"""

from __future__ import annotations

import gc
import logging

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between young collections: one short pause (~12 ms) about every fifty turns, with at
most a few MiB of cyclic garbage waiting; higher saves little more CPU and makes each pause longer."""

logger = logging.getLogger(__name__)


def tune_garbage_collector() -> None:
    """Move everything alive now into the permanent generation and collect the young generation less often.

    Call once the process is assembled, before it serves (calling it again only freezes what was added since)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    logger.info(
        "garbage collector: %s start-up objects frozen; young collections every %s allocations",
        f"{gc.get_freeze_count():,}",
        f"{YOUNG_THRESHOLD:,}",
    )
