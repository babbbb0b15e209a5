"""The terminal chat's signals: one the main thread missed while entering a blocking wait is sent to it again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import select
import signal
import threading
import time
from pathlib import Path

import pytest

from bots.terminal.signals import BLOCKED_OFF_MAIN_THREAD, MainThreadSignals

SELECT_SYSCALLS = {"x86_64": {"23", "270"}, "aarch64": {"72"}}.get(platform.machine(), set())
"""select() and pselect6() by number, as /proc/<tid>/syscall shows the call a thread is blocked in."""


def wait_until_in_select(native_id: int) -> None:
    """Return once the thread is blocked in select(): only then does a signal handled elsewhere not wake it."""
    path = Path(f"/proc/self/task/{native_id}/syscall")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and path.read_text().split()[0] not in SELECT_SYSCALLS:
        time.sleep(0.01)


@pytest.mark.skipif(not SELECT_SYSCALLS or not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_signal_that_did_not_wake_the_main_thread_is_sent_to_it_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bots.terminal.signals")
    signals = MainThreadSignals()
    loops: list[asyncio.AbstractEventLoop] = []
    started = threading.Event()

    def event_loop() -> None:  # like the chat's loop thread: these signals are left to the main thread
        signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_OFF_MAIN_THREAD)

        async def main() -> None:
            loops.append(asyncio.get_running_loop())
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                await signals.watch()

        asyncio.run(main())

    def signal_elsewhere(main_thread: int) -> None:
        # The C-level handler runs on this thread, as when a SIGTERM lands just before readline's select():
        # the main thread's wait is not interrupted by it.
        wait_until_in_select(main_thread)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    read_end, write_end = os.pipe()
    try:
        with signals.installed():
            loop_thread = threading.Thread(target=event_loop, daemon=True)
            loop_thread.start()
            assert started.wait(timeout=30)
            threading.Thread(target=signal_elsewhere, args=(threading.get_native_id(),), daemon=True).start()
            with pytest.raises(SystemExit) as exited:
                select.select([read_end], [], [], 60)
            for task in asyncio.all_tasks(loops[0]):
                loops[0].call_soon_threadsafe(task.cancel)
            loop_thread.join(timeout=30)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert exited.value.code == 128 + signal.SIGTERM
    # The wait ended because the watch sent the signal again. (Its `_resent` count is no witness: the watch may or
    # may not read back the wakeup byte of its own re-send before it is cancelled; on a loaded machine the main
    # thread may also take longer than one recheck to run the handler, so a second re-send is allowed.)
    resends = {r.getMessage() for r in caplog.records if r.name == "bots.terminal.signals"}
    assert resends == {f"signal {signal.SIGTERM} is not handled yet: sending it to the main thread again"}
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are restored


def test_off_the_main_thread_nothing_is_installed() -> None:
    signals = MainThreadSignals()
    before = signal.getsignal(signal.SIGTERM)

    def embedded() -> None:
        with signals.installed():
            assert signal.getsignal(signal.SIGTERM) is before
            asyncio.run(signals.watch())  # returns at once: there is nothing to watch

    thread = threading.Thread(target=embedded)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
