"""The unguessable tokens in the URLs Lookout serves without a login (feeds, digest pages)."""

from __future__ import annotations

import secrets
from typing import Final

TOKEN_BYTES: Final = 24
"""Random bytes in a token (32 URL-safe characters): unguessable, and short enough for a URL people paste."""


def new_token() -> str:
    """A fresh URL-safe token of `TOKEN_BYTES` random bytes."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def looks_like_token(text: str) -> bool:
    """Whether `text` could be a token at all (URL-safe base64, a sane length): anything else is refused before any
    database lookup."""
    return 16 <= len(text) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_") for c in text)
