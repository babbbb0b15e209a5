"""Handing freed memory back to the system, for the steps that build large tables once and drop what built them.

CPython and glibc keep memory a process has freed (Python's arenas, the allocator's heap) for its own later use, so a
long-running service's resident size keeps the peak of every model it loaded. `return_freed_memory` asks glibc to
return free pages (`malloc_trim`); on another C library it does nothing but the optional collection.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

__all__ = ["return_freed_memory"]


def return_freed_memory(*, collect: bool = True) -> None:
    """Collect unreachable objects (unless `collect` is False: after a build that leaves no cycles, the trim alone
    takes a few milliseconds) and hand the allocator's free pages back to the system."""
    if collect:
        gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing more to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)
