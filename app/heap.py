"""Tunes Python's cyclic garbage collector for a long-running Lookout process, once, after start-up.

Guarantees: nothing stays uncollectable — cyclic garbage is still found, only after more allocations; what is
alive after start-up (modules, classes, pydantic schemas) is never freed before exit anyway, so the collector
stops scanning it.

Why (bench/README.md, `chat.py`, fourth session): with CPython's default thresholds (700, 10, 10) the collector
took about a quarter of the `lookout run` process's CPU under 50 concurrent chats — every chat turn (a
pydantic-ai run, PTB objects, aiohttp requests) allocates thousands of container objects, so a young-generation
collection ran every few turns and a full one every couple of seconds, each full one walking the ~250,000 objects
that the imports made. Freezing the start-up heap (`gc.freeze`, Instagram's practice) and a young threshold of
50,000 allocations took free-text turns from ~16 to ~11 ms of CPU. This is the standard, library-free setting for
servers; a one-shot command (`lookout research`, the terminal chat) does not need it.
"""

from __future__ import annotations

import gc
import logging

YOUNG_THRESHOLD = 50_000
"""Allocations (net of frees) between young-generation collections: the default 700 collected every few chat
turns; 50,000 is one collection every several hundred turns, holding at most a few MiB of cyclic garbage."""

logger = logging.getLogger(__name__)


def tune_garbage_collector() -> None:
    """Move everything alive now into the permanent generation and collect the young generation less often.

    Call once in the process's entry point, after the imports and before serving (calling it again only
    freezes what was added since)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    logger.info(
        "garbage collector: %s start-up objects frozen; young collections every %s allocations",
        f"{gc.get_freeze_count():,}",
        f"{YOUNG_THRESHOLD:,}",
    )
