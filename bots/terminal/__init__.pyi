"""The names `bots.terminal` exports, each from the submodule its import names: mypy reads this stub, and
`__init__.py` hands it to `lazy_loader.attach_stub`, which loads each name on first use."""

from .chat import TERMINAL_CHAT_ID as TERMINAL_CHAT_ID
from .chat import ConsoleSender as ConsoleSender
from .chat import SessionFactory as SessionFactory
from .chat import run_terminal_chat as run_terminal_chat
from .render import render_markdown as render_markdown
from .render import terminal_safe as terminal_safe
