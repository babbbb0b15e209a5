"""Reading a file a person sent from its platform's file host, bounded by the bytes actually read.

A platform reports a file's size with the message, but the size is the platform's word (or a forged event's): what
bounds memory is the body read. `read_at_most` reads until the body ends or one byte past the limit, then stops, so a
caller tells "whole file" from "too large" without ever holding more than `limit + 1` bytes of it.

aiohttp's `StreamReader.read(n)` returns at most `n` bytes of what has arrived so far, not `n` bytes: a file that
comes in several chunks is cut at the first one. Hence the loop.
"""

from __future__ import annotations

import aiohttp

__all__ = ["read_at_most"]


async def read_at_most(body: aiohttp.StreamReader, limit: int) -> bytes:
    """The body up to its end or `limit + 1` bytes, whichever comes first: longer than `limit` means too large."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await body.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
