"""Error ids: the short code a person reads ("error id 3f9a1c2e") and the log carries next to the traceback.

One format (eight lowercase hex digits) from one function, for every layer that reports a failure to a person
(the dispatcher, the chat agent, monitor runs, deliveries); it lives in `monitors`, the lowest of them.
"""

from __future__ import annotations

import secrets

__all__ = ["new_error_id"]


def new_error_id() -> str:
    """A fresh error id: eight lowercase hex digits, unique enough to find one line in a day's log."""
    return secrets.token_hex(4)
