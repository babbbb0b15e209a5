"""The terminal frontend: a REPL that sends each line to the dispatcher and prints replies and delivered digests.

Threads: the prompt reads lines on the main thread (so Ctrl-C clears the line being typed or cancels the
work under way, as in any shell) while the event loop — dispatcher, scheduler, delivery worker — runs on
its own thread and keeps running monitors and delivering digests while the person types. Lines cross
over with `run_coroutine_threadsafe`; output from both sides goes through one `ConsoleOutput`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from agent import Incoming
from bots.dispatcher import Dispatches
from bots.terminal.output import ConsoleOutput
from bots.terminal.reader import LineReader
from bots.terminal.signals import BLOCKED_OFF_MAIN_THREAD, MainThreadSignals
from kernel import Button, ChatSender, Recipient, Reply

__all__ = [
    "QUIT_WORDS",
    "TERMINAL_CHAT_ID",
    "ConsoleSender",
    "Dispatches",
    "SessionFactory",
    "TerminalChat",
    "run_terminal_chat",
]

logger = logging.getLogger(__name__)

TERMINAL_CHAT_ID = "terminal"
"""The terminal's one chat per database: its monitors, memory and timezone outlive each session."""
QUIT_WORDS = frozenset({"/quit", "/exit", "quit", "exit"})
"""Lines that end the session like Ctrl-D does (people type them whatever the greeting says)."""
PROMPT = "> "
_WAIT_SLICE_SECONDS = 0.5


SessionFactory = Callable[[ChatSender[Any]], AbstractAsyncContextManager[Dispatches]]
"""Opens everything behind the chat on the event loop (database, monitors, scheduler, delivery with this
sender registered for the terminal) and yields the dispatcher; closing it stops them cleanly."""


class ConsoleSender:
    """The terminal's `ChatSender`: digests for the terminal chat are printed here while the session runs."""

    def __init__(self, output: ConsoleOutput) -> None:
        self._output = output

    def parts(self, message: Reply) -> list[Reply]:
        """A digest is printed whole: one part."""
        return [message]

    async def send_part(self, chat: Recipient, part: Reply) -> None:
        logger.info("printing run %s for terminal chat %d", part.run_id, chat.id)
        self._output.digest(part)

    def note(self, text: str) -> None:
        """A line about the session itself (e.g. another process runs the monitors), printed as is."""
        self._output.note(text)


@dataclass(frozen=True, kw_only=True)
class _Choice:
    """Buttons of the last reply, which the next line may pick by number or label."""

    buttons: tuple[Button, ...]

    def pick(self, line: str) -> Button | None:
        text = line.strip()
        if text.isdigit() and 1 <= int(text) <= len(self.buttons):
            return self.buttons[int(text) - 1]
        return next((b for b in self.buttons if b.label.casefold() == text.casefold()), None)


class TerminalChat:
    """One person's side of the terminal chat: a line in, the replies printed (runs on the event loop)."""

    def __init__(self, dispatcher: Dispatches, output: ConsoleOutput, *, user: str) -> None:
        self._dispatcher = dispatcher
        self._output = output
        self._user = user
        self._choice: _Choice | None = None

    async def handle_line(self, line: str) -> None:
        """Send one line (or the button it picks) to the dispatcher and print what comes back."""
        text = line.strip()
        if not text:
            return
        choice, self._choice = self._choice, None
        button = choice.pick(text) if choice is not None else None
        try:
            incoming = Incoming(
                platform="terminal",
                chat_external_id=TERMINAL_CHAT_ID,
                user_external_id=self._user,
                text=button.label if button else text,
                callback_data=button.callback_data if button else None,
                is_private=True,
                user_display_name=self._user,
            )
        except ValidationError:
            self._output.note("That message is too long to send (100,000 characters at most).")
            return
        self._output.working()
        try:
            await self._dispatcher.dispatch(incoming, progress=self._output.progress, deliver=self._print)
        finally:
            self._output.clear_status()

    async def _print(self, replies: list[Reply]) -> None:
        self._output.clear_status()
        for reply in replies:
            self._output.reply(reply)
            if reply.buttons:
                self._choice = _Choice(buttons=reply.buttons)


class _LoopThread:
    """The event loop on its own thread, holding the session open until `close()`."""

    def __init__(self, open_session: SessionFactory, signals: MainThreadSignals) -> None:
        self._open_session = open_session
        self._signals = signals
        self._ready: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, Dispatches, asyncio.Event]] = (
            concurrent.futures.Future()
        )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, sender: ChatSender[Any]) -> Dispatches:
        """Open the session; raises what opening it raised (a database that cannot be reached, ...)."""
        self._thread = threading.Thread(target=self._main, args=(sender,), name="lookout-chat-loop", daemon=True)
        self._thread.start()
        loop, dispatcher, _stop = self._ready.result()
        self._loop = loop
        return dispatcher

    def _main(self, sender: ChatSender[Any]) -> None:
        if hasattr(signal, "pthread_sigmask"):
            # These signals must reach the main thread, which waits for input; this thread and the database and
            # executor threads it starts (they inherit the mask) leave them to it.
            signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_OFF_MAIN_THREAD)
        try:
            asyncio.run(self._serve(sender))
        except BaseException as error:  # handed to the main thread, which reports it
            if not self._ready.done():
                self._ready.set_exception(error)
            else:
                logger.exception("the terminal chat's event loop stopped with an error")

    async def _serve(self, sender: ChatSender[Any]) -> None:
        stop = asyncio.Event()
        watching = asyncio.create_task(self._signals.watch(), name="signal watch")
        try:
            async with self._open_session(sender) as dispatcher:
                self._ready.set_result((asyncio.get_running_loop(), dispatcher, stop))
                await stop.wait()
        finally:
            watching.cancel()

    def submit(self, work: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def close(self) -> None:
        """Stop the session (deliveries due now are still printed) and wait for the loop to finish."""
        if self._thread is None:
            return
        # exception() waits for a start-up still under way; a failed one was reported by start().
        if self._thread.is_alive() and self._ready.exception() is None:
            loop, _, stop = self._ready.result()
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        self._thread.join()


def _wait(future: concurrent.futures.Future[None], output: ConsoleOutput) -> None:
    """Wait for one line's work; Ctrl-C cancels it and the chat goes on."""
    try:
        while True:
            try:
                # In slices: a Ctrl-C that lands just before a blocking wait begins is still seen promptly.
                future.result(timeout=_WAIT_SLICE_SECONDS)
            except concurrent.futures.TimeoutError:
                continue
            return
    except KeyboardInterrupt:
        future.cancel()  # the task on the loop is cancelled; its conversation lock is released as it unwinds
        output.clear_status()
        output.note("Cancelled.")
    except concurrent.futures.CancelledError:
        output.note("Cancelled.")
    except Exception:  # the dispatcher has its own error boundary; this is the last line of defence
        logger.exception("handling a terminal line failed")
        output.note("Something went wrong on my side; the log has the details.")


def run_terminal_chat(
    open_session: SessionFactory,
    *,
    stdin: TextIO,
    stdout: TextIO,
    exports_dir: Path,
    user: str,
    history_file: Path | None = None,
) -> None:
    """Run the REPL until Ctrl-D, /quit or SIGTERM; call it on the main thread for Ctrl-C to work.

    Raises what opening the session raises; after that, problems are reported in the chat, never raised.
    SIGTERM and SIGHUP close the session cleanly, then raise SystemExit (128 + the signal's number).
    """
    signals = MainThreadSignals()
    with signals.installed():
        loop = _LoopThread(open_session, signals)
        _repl(loop, stdin=stdin, stdout=stdout, exports_dir=exports_dir, user=user, history_file=history_file)


def _repl(
    loop: _LoopThread,
    *,
    stdin: TextIO,
    stdout: TextIO,
    exports_dir: Path,
    user: str,
    history_file: Path | None,
) -> None:
    interactive = stdin.isatty()
    output = ConsoleOutput(stdout, exports_dir=exports_dir, styled=stdout.isatty())
    reader = LineReader(stdin, interactive=interactive, history_file=history_file)
    output.line_buffer = reader.line_buffer
    try:
        dispatcher = loop.start(ConsoleSender(output))
        chat = TerminalChat(dispatcher, output, user=user)
        while True:
            prompt = PROMPT if interactive else ""
            output.prompt_started(prompt)
            try:
                text = reader.read(prompt)
            except KeyboardInterrupt:  # Ctrl-C at the prompt drops the line being typed, as a shell does
                output.prompt_interrupted()
                continue
            finally:
                output.prompt_ended()
            if text is None:  # Ctrl-D or the end of piped input
                if interactive:
                    output.note("")
                break
            if text.strip().casefold() in QUIT_WORDS:
                break
            with reader.typing_held():
                _wait(loop.submit(chat.handle_line(text)), output)
    finally:
        reader.close()
        loop.close()
