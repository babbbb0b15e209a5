"""The names `bots.slack` exports, each from the submodule its import names: mypy reads this stub, and
`__init__.py` hands it to `lazy_loader.attach_stub`, which loads each name on first use."""

from .api import build_web_client as build_web_client
from .frontend import CredentialsRefusedError as CredentialsRefusedError
from .frontend import SlackFrontend as SlackFrontend
from .sender import SlackSender as SlackSender
