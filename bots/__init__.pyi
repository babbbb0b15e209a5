"""The names `bots` exports, each from the submodule its import names: mypy reads this stub, and
`__init__.py` hands it to `lazy_loader.attach_stub`, which loads each name on first use."""

from .dispatcher import Dispatcher as Dispatcher
from .dispatcher import Dispatches as Dispatches
from .dispatcher import SharedLocks as SharedLocks
from .shared_limits import SlotReserver as SlotReserver
from .slack import CredentialsRefusedError as CredentialsRefusedError
from .slack import SlackFrontend as SlackFrontend
from .slack import SlackSender as SlackSender
from .slack import build_web_client as build_web_client
from .telegram import SharedRateLimiter as SharedRateLimiter
from .telegram import TelegramFrontend as TelegramFrontend
from .telegram import TelegramLimits as TelegramLimits
from .telegram import TelegramOptions as TelegramOptions
from .telegram import TelegramSender as TelegramSender
from .telegram import build_bot as build_bot
from .terminal import TERMINAL_CHAT_ID as TERMINAL_CHAT_ID
from .terminal import ConsoleSender as ConsoleSender
from .terminal import SessionFactory as SessionFactory
from .terminal import render_markdown as render_markdown
from .terminal import run_terminal_chat as run_terminal_chat
from .terminal import terminal_safe as terminal_safe
