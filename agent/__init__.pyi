"""The names `agent` exports, each from the submodule its import names: mypy reads this stub, and
`__init__.py` hands it to `lazy_loader.attach_stub`, which loads each name on first use."""

from .access import AccessPolicy as AccessPolicy
from .chat.agent import ChatAgent as ChatAgent
from .commands import CommandRouter as CommandRouter
from .commands import bot_commands as bot_commands
from .commands import is_instant_command as is_instant_command
from .commands import slack_commands as slack_commands
from .context import AfterReply as AfterReply
from .context import ConversationSettings as ConversationSettings
from .context import Services as Services
from .context import Turn as Turn
from .context import ignore_progress as ignore_progress
from .conversation import Conversation as Conversation
from .messages import MAX_INCOMING_FILE_BYTES as MAX_INCOMING_FILE_BYTES
from .messages import Incoming as Incoming
from .messages import IncomingFile as IncomingFile
