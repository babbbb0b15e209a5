"""Tunes Python's cyclic garbage collector for a long-running Lookout process, once, after start-up.

Guarantees: nothing becomes uncollectable by it — cyclic garbage is still found, only after more allocations;
what is alive once the process is assembled (modules, classes, pydantic schemas, the app's objects) lives until
exit anyway, so the collector stops scanning it.

Why (`bench/chat.py`): with CPython's default thresholds (700, 10, 10) the collector took about 2 ms of CPU per
free-text turn under 50 concurrent chats: every turn (a pydantic-ai run, PTB objects, aiohttp requests) allocates
thousands of container objects, so a young collection ran every turn or two, and each full collection walked
the start-up heap (about 0.2 s each, a pause every chat waited through). With the start-up heap frozen
(`gc.freeze`, the practice Instagram described for its servers) and a young threshold of 10,000, collections take
~0.3 s per 1,000 turns and none is a full one. A one-shot command (`lookout research`, the terminal chat) does
not need it.
"""

from __future__ import annotations

import gc
import logging

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between young collections. The default 700 collected every turn or two; 50,000
saved little more CPU (~0.2 s per 1,000 turns) but made each young collection a ~70 ms pause; 10,000 pauses
~12 ms about every fifty turns and holds at most a few MiB of cyclic garbage."""

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
