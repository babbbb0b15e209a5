"""Executes every `/command` for the chat that sent it: dispatch by command class to the handlers."""

from __future__ import annotations

import logging
from datetime import timedelta

from agent.commands import monitors as command_monitors
from agent.commands import portability as command_portability
from agent.commands import research as command_research
from agent.commands import settings as command_settings
from agent.commands import subscriptions as command_subscriptions
from agent.commands.specs import (
    BriefingCommand,
    BrowseCommand,
    CollectCommand,
    Command,
    DeliverCommand,
    DigestCommand,
    ExportCommand,
    ExportMonitorsCommand,
    ForgetCommand,
    HelpCommand,
    ImportCommand,
    LanguageCommand,
    MonitorsCommand,
    PauseCommand,
    ProfileCommand,
    QuietCommand,
    ResumeCommand,
    SearchCommand,
    ShareCommand,
    StartCommand,
    SubscribeCommand,
    TimezoneCommand,
    TrackCommand,
    TransferCommand,
    UnshareCommand,
    UnsubscribeCommand,
    UntrackCommand,
    UsageCommand,
    help_text,
)
from agent.confirmations import DEFAULT_CONFIRMATION_TTL
from agent.context import Services, Turn
from agent.messages import Reply

__all__ = ["START_TEXT", "CommandRouter"]

logger = logging.getLogger(__name__)

START_TEXT = """**Lookout** keeps watch for you. It follows a topic across Hacker News, news, arXiv, GitHub, \
Wikipedia, the web and any RSS feed, checks what it finds (relevance, credibility, duplicates) and sends a short \
cited digest on your schedule, with a CSV of everything it collected and a chart.

Try:
- `/track DeepSeek daily at 08:30 from hn,news,arxiv` — a digest every morning
- `/track "open source LLM" every 6 hours` — the default sources, four times a day
- `/search open source LLM licences` — one digest, right now
- `/collect posts about Rust in embedded systems target 500` — a big CSV for your own analysis
- `/monitors` — what this chat follows; `/digest <id>` runs one now

Set `/timezone`, `/language` and `/profile` (who you are, what you care about) so digests fit you. \
You can also just write to me in plain words. `/help` lists every command."""


class CommandRouter:
    """The `CommandHandler` of `agent.conversation.Conversation`: runs a parsed command for `turn.chat`.

    Expected refusals (unknown monitor, another chat's monitor, bad schedule or sources) come back as a short
    reply; anything unexpected propagates to the dispatcher's error boundary.
    """

    def __init__(self, services: Services, *, confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL) -> None:
        self._services = services
        self._confirmation_ttl = confirmation_ttl
        """How long /track's offer and /import's list stay open; they are stored with the conversation like the
        agent's proposals, so "yes" and the buttons are settled in one place (the chat agent)."""

    async def execute(self, command: Command, turn: Turn) -> list[Reply]:
        """The replies to one parsed command, acting only on `turn.chat` (admins on any monitor)."""
        services = self._services
        logger.info("chat %d: /%s", turn.chat.id, command.name)
        match command:
            case StartCommand():
                return [Reply(text=START_TEXT)]
            case HelpCommand(command=name):
                return [Reply(text=help_text(name))]
            case TrackCommand():
                return await command_monitors.track(services, turn, command, confirmation_ttl=self._confirmation_ttl)
            case MonitorsCommand():
                return await command_monitors.list_monitors(services, turn, command)
            case UntrackCommand():
                return await command_monitors.untrack(services, turn, command)
            case PauseCommand():
                return await command_monitors.pause(services, turn, command)
            case ResumeCommand():
                return await command_monitors.resume(services, turn, command)
            case DigestCommand():
                return await command_monitors.digest(services, turn, command)
            case QuietCommand():
                return await command_monitors.quiet(services, turn, command)
            case SearchCommand():
                return await command_research.search(services, turn, command)
            case CollectCommand():
                return await command_research.collect(services, turn, command)
            case ExportCommand():
                return await command_research.export(services, turn, command)
            case ExportMonitorsCommand():
                return await command_portability.export_chat_monitors(services, turn, command)
            case ImportCommand():
                return await command_portability.import_monitors(
                    services, turn, command, confirmation_ttl=self._confirmation_ttl
                )
            case ShareCommand():
                return await command_subscriptions.share(services, turn, command)
            case UnshareCommand():
                return await command_subscriptions.unshare(services, turn, command)
            case BrowseCommand():
                return await command_subscriptions.browse(services, turn, command)
            case SubscribeCommand():
                return await command_subscriptions.subscribe(services, turn, command)
            case UnsubscribeCommand():
                return await command_subscriptions.unsubscribe(services, turn, command)
            case TransferCommand():
                return await command_subscriptions.transfer(services, turn, command)
            case BriefingCommand():
                return await command_subscriptions.briefing(services, turn, command)
            case DeliverCommand():
                return await command_subscriptions.deliver(services, turn, command)
            case TimezoneCommand():
                return await command_settings.timezone(services, turn, command)
            case LanguageCommand():
                return await command_settings.language(services, turn, command)
            case ProfileCommand():
                return await command_settings.profile(services, turn, command)
            case ForgetCommand():
                return await command_settings.forget(services, turn)
            case UsageCommand():
                return await command_settings.usage(services, turn)
