"""Error ids: the short code a person reads ("error id 3f9a1c2e") and the log carries next to the traceback, and
the one wording that names it.

One format (eight lowercase hex digits) from one function, for every layer that reports a failure to a person
(the dispatcher, the chat agent, monitor runs, deliveries); one apology for a message that could not be answered,
and one way to append the id to a failure line (a run's notice, a delivery's stored error, `/monitors`).
"""

from __future__ import annotations

import secrets

__all__ = ["apology", "error_reference", "new_error_id"]


def new_error_id() -> str:
    """A fresh error id: eight lowercase hex digits, unique enough to find one line in a day's log."""
    return secrets.token_hex(4)


def apology(error_id: str) -> str:
    """What a person reads when their message could not be answered: no internal text, only the id to quote."""
    return f"Something went wrong on my side (error id {error_id}). Try again later."


def error_reference(error_id: str | None) -> str:
    """The id appended to a failure line (" (error id 3f9a1c2e)"), or nothing when there is none."""
    return f" (error id {error_id})" if error_id else ""
