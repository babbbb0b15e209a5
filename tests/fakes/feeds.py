"""Feed bodies the fakes serve: a valid feed of many unrelated items (big, slow to parse, but not broken)."""

from __future__ import annotations


def many_items_feed(count: int) -> bytes:
    """An RSS 2.0 feed of `count` items, none about any topic the tests search for."""
    items = "".join(
        f"<item><title>Unrelated note {n}</title><link>https://many.example/{n}</link>"
        f"<description>Nothing about the topic here, entry {n}.</description></item>"
        for n in range(count)
    )
    return (
        f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Many</title>'
        f"<link>https://many.example/</link>{items}</channel></rss>"
    ).encode()
