"""How fetched text is fenced off as untrusted data before the chat model sees it (the chat's rules name the tag)."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNTRUSTED_TAG", "untrusted_block"]

UNTRUSTED_TAG: Final = "untrusted_source_data"
"""The tag every piece of fetched text (feed items, pages, stored items) is wrapped in before the model sees it."""


def untrusted_block(label: str, text: str) -> str:
    """Wrap fetched text as labelled untrusted data, so the model can tell it from instructions.

    Anything in the text that looks like our own tags is defused first: a page cannot close the block early and
    continue as if it were outside it.
    """
    cleaned = re.sub(rf"</?\s*{UNTRUSTED_TAG}[^>]*>", "[removed tag]", text, flags=re.IGNORECASE)
    safe_label = re.sub(r'["<>\n]', " ", label)[:200]
    return f'<{UNTRUSTED_TAG} source="{safe_label}">\n{cleaned}\n</{UNTRUSTED_TAG}>'
