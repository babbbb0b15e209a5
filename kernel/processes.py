"""Processes on this machine: whether one still runs, for what a process leaves behind that only it may remove
(a delivery claim, a private temporary folder) once it is gone."""

from __future__ import annotations

import os
import socket

__all__ = ["THIS_HOST", "process_runs"]

THIS_HOST = socket.gethostname()
"""This machine's name: a process id means something only on the host that gave it (containers sharing a volume
each number their own processes)."""


def process_runs(pid: int) -> bool:
    """Whether a process with this id runs on this machine (another user's counts: it runs, it is not ours to
    judge). A signal 0 is sent: nothing reaches the process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
