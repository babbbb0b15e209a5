"""The alert commands: `/alert <topic> when <condition>`, `/alerts`, `/alert off <n>`, for the chat that asks.

An alert watches a monitor the chat receives (owned or subscribed): named by its number (`/alert 3 when …`), or by
its topic, which finds the chat's monitor of that topic or creates one (`ALERT_SCHEDULE_TEXT`) so that
"/alert DeepSeek when it releases a new model" works on its own. A number before words (`/alert 3 DeepSeek when …`)
names the monitor and the words the alert's topic; when the chat has no monitor of that number it is told so, and
that a topic starting with a number is written in quotes (`/alert "1984 remake" when …`). Each run's new stories are
checked against it and a match is pushed at once (`monitors.alerts`). The chat agent proposes alerts
(`create_alert`) and their removal (`remove_alert`); the person confirms.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from pydantic import Field

from agent.commands.action import Arguments, Family, Proposal, SlackCommand, ToolRefusal, ToolUse, monitor_role
from agent.commands.common import chat_timezone, refuse
from agent.commands.grammar import CommandError, ParseOptions, monitor_id, shown
from agent.context import Services, Turn
from kernel import Reply
from monitors import (
    MAX_ALERTS_PER_CHAT,
    MAX_TOPIC_CHARS,
    MonitorNotFoundError,
    MonitorView,
    ScheduleError,
    monitor_name,
    normalise_topic,
    parse_schedule,
)
from research import AlertCondition, escape_markdown, own_topic_words, parse_condition

__all__ = ["ACTIONS", "ALERT_SCHEDULE_TEXT", "AlertCommand", "AlertOffCommand", "AlertsCommand"]

ALERT_SCHEDULE_TEXT: Final = "every 2 hours"
"""The schedule of a monitor an alert creates for its topic: often enough that "at once" means within hours, rarely
enough that a topic's sources are asked a dozen times a day."""
ALERT_EXAMPLE: Final = "/alert DeepSeek when it releases a new model"

_WHEN = re.compile(r"\s*\bwhen\b\s*", re.IGNORECASE)
_NUMBER_THEN_WORDS = re.compile(r"(#?[0-9]+)\s+(\S.*)")


class AlertCommand(Arguments):
    """`/alert <topic|monitor number> when <condition>`, and the chat tool `create_alert`."""

    name: ClassVar[str] = "alert"
    topic: str = Field(default="", description='What to watch, e.g. "DeepSeek"; may be empty with monitor_id.')
    condition: str = Field(description='What must happen, e.g. "it releases a new model", "3 or more outlets '
                           'report a recall".')  # fmt: skip
    monitor_id: int | None = Field(default=None, description="A monitor of this chat to watch (see list_monitors).")


class AlertOffCommand(Arguments):
    """`/alert off <n>`, and the chat tool `remove_alert`."""

    name: ClassVar[str] = "alert_off"
    alert_id: int = Field(description="The alert's number (/alerts).")


class AlertsCommand(Arguments):
    """`/alerts`."""

    name: ClassVar[str] = "alerts"


# --- the monitor an alert watches ---------------------------------------------------------------------------------


async def _existing(services: Services, turn: Turn, command: AlertCommand) -> MonitorView | None:
    """The monitor the alert names (by number; MonitorNotFoundError when the chat cannot see it) or the chat's
    monitor of its topic (owned ones first); None when it names a topic the chat has no monitor of."""
    if command.monitor_id is not None:
        view, _role = await monitor_role(services, turn, command.monitor_id)
        return view
    wanted = normalise_topic(command.topic)
    views = await services.monitors.list_monitors(turn.chat.id, chat=turn.chat)
    matching = [view for view in views if normalise_topic(view.topic) == wanted]
    matching.sort(key=lambda view: not view.owned_here)
    return matching[0] if matching else None


def _checked(services: Services, turn: Turn, command: AlertCommand) -> AlertCommand:
    """The command with its words cleaned; ToolRefusal (a sentence) when it cannot be an alert."""
    topic = " ".join(command.topic.split()).strip("\"“”'")
    condition = " ".join(command.condition.split())
    if command.monitor_id is None and not topic:
        raise ToolRefusal(f"Say what to watch, like {ALERT_EXAMPLE}.")
    if len(topic) > MAX_TOPIC_CHARS:
        raise ToolRefusal(f"Keep the topic under {MAX_TOPIC_CHARS} characters.")
    try:
        services.monitors.alerts.check_condition(condition)
    except ValueError as error:
        raise ToolRefusal(str(error)) from None
    return command.model_copy(update={"topic": topic, "condition": condition})


def _own_topic(topic: str, view: MonitorView) -> str | None:
    """The alert's topic when it is not its monitor's (only stories carrying its words are looked at), else None."""
    return topic if own_topic_words(topic, view.topic) else None


def _by_words(condition: AlertCondition, topic: str) -> str:
    """What decides without a model, in words: `it carries every word of the condition and of “Mistral”, and 3 or
    more outlets report it`."""
    of = [
        *(["the condition"] if condition.words else []),
        *([f"“{escape_markdown(topic)}”"] if condition.topic_words else []),
    ]
    carries = f"it carries every word of {' and of '.join(of)}" if of else ""
    count = f"{condition.min_outlets} or more outlets report it" if condition.min_outlets > 1 else ""
    return ", and ".join(part for part in (carries, count) if part) or "it is new"


def _watching(condition: str, view: MonitorView, topic: str) -> str:
    own = _own_topic(topic, view)
    about = f" in stories about “{escape_markdown(own)}”" if own else ""
    return f"“{escape_markdown(condition)}”{about} on monitor {monitor_name(view.id, view.topic)}"


# --- parsing and proposals ------------------------------------------------------------------------------------


def _parse_alert(args: str, _options: ParseOptions) -> AlertCommand | AlertOffCommand:
    words = args.split()
    if not words:
        raise CommandError("alert", f"Say what to watch and when to tell you, like {ALERT_EXAMPLE}.")
    if words[0].lower() == "off":
        if len(words) != 2 or not words[1].lstrip("#").isdigit() or len(words[1]) > 12:
            raise CommandError("alert", "Give the alert's number after off, like /alert off 2 (see /alerts).")
        return AlertOffCommand(alert_id=int(words[1].lstrip("#")))
    parts = _WHEN.split(args, maxsplit=1)
    if len(parts) != 2 or not parts[1].strip():
        raise CommandError("alert", f"Say what should happen after “when”, like {ALERT_EXAMPLE}.")
    written, condition = parts[0].strip(), parts[1].strip()
    topic = written.strip("\"“”'")
    if not topic:
        raise CommandError("alert", f"Say what to watch before “when”, like {ALERT_EXAMPLE}.")
    if re.fullmatch(r"#?\d+", topic):
        return AlertCommand(monitor_id=monitor_id("alert", topic), condition=condition)
    numbered = _NUMBER_THEN_WORDS.fullmatch(written)  # unquoted: "/alert 3 DeepSeek when …" names monitor #3
    if numbered is not None and len(numbered[2]) <= MAX_TOPIC_CHARS:
        return AlertCommand(monitor_id=monitor_id("alert", numbered[1]), topic=numbered[2], condition=condition)
    if len(topic) > MAX_TOPIC_CHARS:
        raise CommandError("alert", f"Keep the topic under {MAX_TOPIC_CHARS} characters, not {shown(topic)}.")
    return AlertCommand(topic=topic, condition=condition)


async def _propose_alert(services: Services, turn: Turn, command: AlertCommand) -> Proposal | str:
    command = _checked(services, turn, command)
    try:
        await services.monitors.alerts.check_room(turn.chat.id)
    except ValueError as error:
        raise ToolRefusal(str(error)) from None
    view = await _existing(services, turn, command)
    if view is None:
        return Proposal(
            description=f"create monitor “{escape_markdown(command.topic)}” ({ALERT_SCHEDULE_TEXT}) and tell this "
            f"chat at once when {escape_markdown(command.condition)}",
            arguments=command,
        )
    own = _own_topic(command.topic, view)
    about = f" in stories about “{escape_markdown(own)}”" if own else ""
    return Proposal(
        description=f"tell this chat at once when {escape_markdown(command.condition)}{about} "
        f"(monitor {monitor_name(view.id, view.topic)})",
        arguments=command.model_copy(update={"monitor_id": view.id}),
    )


async def _propose_alert_off(services: Services, turn: Turn, command: AlertOffCommand) -> Proposal | str:
    found = [entry for entry in await services.monitors.alerts.list(turn.chat.id) if entry.id == command.alert_id]
    if not found:
        raise ToolRefusal(f"This chat has no alert #{command.alert_id}.")
    return Proposal(description=f"remove alert #{found[0].id} (when {found[0].condition})")


ACTIONS = Family()
"""The alert family, in the order /help lists it."""


@ACTIONS.action(
    pattern="<topic|monitor id> when <condition> · off <n>",
    example=ALERT_EXAMPLE,
    parse=_parse_alert,
    tool=ToolUse(
        name="create_alert",
        description="Propose an alert: tell this chat at once when a new story meets a condition (e.g. a "
        "release); the person must confirm.",
        propose=_propose_alert,
    ),
    slack=SlackCommand(
        description="Get told at once when something happens", usage_hint="DeepSeek when it releases a model"
    ),
)
async def alert(services: Services, turn: Turn, command: AlertCommand) -> list[Reply]:
    """Tell this chat at once when something happens in a monitor's new stories.

    Store the alert on the named monitor, the chat's monitor of the topic, or a new monitor for the topic."""
    try:
        command = _checked(services, turn, command)
        await services.monitors.alerts.check_room(turn.chat.id)
        view = await _existing(services, turn, command)
    except MonitorNotFoundError as error:
        if command.monitor_id is not None and command.topic:
            quoted = escape_markdown(f"{command.monitor_id} {command.topic}")
            return refuse(f'{error} A topic that starts with a number goes in quotes: /alert "{quoted}" when …')
        return refuse(str(error))
    except (ToolRefusal, ValueError) as error:
        return refuse(str(error), usage="alert")
    created = ""
    if view is None:
        try:
            zone = parse_schedule(
                ALERT_SCHEDULE_TEXT,
                timezone=chat_timezone(turn, services),
                min_interval_seconds=services.settings.min_interval_seconds,
            ).timezone
            view = await services.monitors.create_monitor(
                turn.chat.id, command.topic, schedule_text=ALERT_SCHEDULE_TEXT, timezone=zone
            )
        except (ScheduleError, ValueError) as error:
            return refuse(
                f"This chat has no monitor of “{escape_markdown(command.topic)}” and I could not create one: "
                f"{escape_markdown(str(error))}. `/track` one, then `/alert <its number> when …`."
            )
        created = (
            f"\nThis chat had no monitor of it, so I created {monitor_name(view.id, view.topic, 'bold')} "
            f"({view.schedule}); its digests come here too (`/untrack {view.id}` deletes it and its alerts)."
        )
    try:
        record = await services.monitors.alerts.create(
            turn.chat.id, monitor_id=view.id, topic=command.topic or view.topic, condition=command.condition
        )
    except ValueError as error:
        return refuse(str(error))
    condition = parse_condition(record.condition, topic=record.topic, monitor_topic=view.topic)
    no_model = (
        f"\nNo language model is configured: a story fires when {_by_words(condition, record.topic)}."
        if services.models.light is None
        else ""
    )
    which = (
        "its new stories and the stories that gain reports (counting every outlet so far)"
        if condition.min_outlets > 1
        else "new stories only"
    )
    watching = _watching(record.condition, view, record.topic)
    text = (
        f"Alert #{record.id}: I'll tell you here at once when {watching} — checked on "
        f"each of its runs, {which}, each story once.{created}{no_model}\n"
        f"`/alerts` lists this chat's alerts, `/alert off {record.id}` removes this one."
    )
    return [Reply(text=text)]


@ACTIONS.action(instant=True)
async def list_alerts(services: Services, turn: Turn, _command: AlertsCommand) -> list[Reply]:
    """This chat's alerts."""
    alerts = await services.monitors.alerts.list(turn.chat.id)
    if not alerts:
        return [Reply(text=f"No alerts in this chat yet — try `{ALERT_EXAMPLE}`.")]
    lines = [
        f"- **#{entry.id}** {escape_markdown(entry.topic)}: when {escape_markdown(entry.condition)} — monitor "
        f"{monitor_name(entry.monitor_id, entry.monitor_topic)}"
        + (f" · fired for {entry.fired} stor{'y' if entry.fired == 1 else 'ies'}" if entry.fired else "")
        for entry in alerts
    ]
    return [
        Reply(
            text=f"**Alerts of this chat** ({len(alerts)} of {MAX_ALERTS_PER_CHAT}):\n"
            + "\n".join(lines)
            + "\n`/alert off <n>` removes one."
        )
    ]


@ACTIONS.action(
    command=False,
    tool=ToolUse(
        name="remove_alert", description="Propose removing an alert of this chat.", propose=_propose_alert_off
    ),
)
async def alert_off(services: Services, turn: Turn, command: AlertOffCommand) -> list[Reply]:
    """Remove an alert of this chat."""
    if not await services.monitors.alerts.remove(turn.chat.id, command.alert_id):
        return refuse(f"This chat has no alert #{command.alert_id}; `/alerts` lists them.")
    return [Reply(text=f"Alert #{command.alert_id} removed; its monitor goes on as before.")]
