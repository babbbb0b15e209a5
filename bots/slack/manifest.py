"""Lookout's Slack app manifest (`slack_app_manifest.yaml`), generated: its slash commands come from the catalogue
of chat actions, so the file, the commands the app registers and /help cannot drift apart.

Write it with `uv run python -m bots.slack.manifest > slack_app_manifest.yaml`; a test checks the committed file is
what this module generates.
"""

from __future__ import annotations

import json

from agent import slack_commands

__all__ = ["SLASH_COMMANDS", "UMBRELLA_COMMAND", "manifest_text"]

UMBRELLA_COMMAND = "/lookout"
"""`/lookout <command…>` reaches every command; empty text means /help."""


def _umbrella() -> tuple[str, str]:
    """The umbrella command's description and usage hint, naming the commands that have a slash of their own."""
    names = [command.removeprefix("/") for command, _, _ in slack_commands()]
    description = f"Talk to Lookout — any command ({', '.join([*names, 'help'])}…)"
    hints = [f"{command.removeprefix('/')} {hint or ''}".strip() for command, _, hint in slack_commands()]
    return description, " | ".join([*hints, "help"])


SLASH_COMMANDS: dict[str, str] = {
    UMBRELLA_COMMAND: _umbrella()[0],
    **{command: description for command, description, _ in slack_commands()},
}
"""The slash commands the app registers (and the manifest declares), with their descriptions."""

_HEAD = """\
# Lookout's Slack app. Create it at https://api.slack.com/apps → "Create New App" → "From a manifest",
# pick the workspace and paste this file. Then install it to the workspace and copy the tokens into .env
# (see "Slack" in README.md). Socket Mode is on: no public URL is needed. For HTTP mode instead, set
# socket_mode_enabled to false and uncomment every `url:` and `request_url:` line below, with your public host
# (all of them point at the same /slack/events endpoint).
# Generated from the catalogue of chat actions: `uv run python -m bots.slack.manifest > slack_app_manifest.yaml`.
display_information:
  name: Lookout
  description: "Keeps watch for you: standing monitors and on-the-spot research with cited digests."
  background_color: "#1f2937"
  long_description: >-
    Lookout answers questions by searching public sources (Hacker News, news, arXiv, GitHub, RSS, ...)
    and keeps standing monitors: "/track DeepSeek daily at 9" posts a cited digest to the channel every
    morning, with a CSV of everything it collected and a chart of the volume over time. Mention @Lookout
    in a channel or write to it directly to talk; it remembers the conversation per thread.
features:
  app_home:
    home_tab_enabled: false
    messages_tab_enabled: true
    messages_tab_read_only_enabled: false
  bot_user:
    display_name: Lookout
    always_online: true
  slash_commands:
"""

_TAIL = """\
oauth_config:
  scopes:
    bot:
      - app_mentions:read  # mentions in channels: free text, answered in the thread
      - chat:write  # replies, digests and the progress message
      - commands  # the slash commands above
      - files:read  # a JSON or OPML file shared with "import", to create monitors from it
      - files:write  # CSV and chart attachments (files_upload_v2)
      - im:history  # direct messages to the bot (message.im events); answering them needs only chat:write
settings:
  event_subscriptions:
    # request_url: https://lookout.example.org/slack/events
    bot_events:
      - app_mention
      - message.im
  interactivity:
    is_enabled: true
    # request_url: https://lookout.example.org/slack/events
  org_deploy_enabled: false
  socket_mode_enabled: true
  token_rotation_enabled: false
"""


def _command(command: str, description: str, usage_hint: str | None) -> str:
    # JSON strings are valid YAML double-quoted scalars
    lines = [f"    - command: {command}", f"      description: {json.dumps(description, ensure_ascii=False)}"]
    if usage_hint:
        lines.append(f"      usage_hint: {json.dumps(usage_hint, ensure_ascii=False)}")
    lines += ["      should_escape: false", "      # url: https://lookout.example.org/slack/events"]
    return "\n".join(lines) + "\n"


def manifest_text() -> str:
    """The whole manifest, as committed in `slack_app_manifest.yaml`."""
    description, hint = _umbrella()
    commands = [_command(UMBRELLA_COMMAND, description, hint)]
    commands += [_command(command, text, usage_hint) for command, text, usage_hint in slack_commands()]
    return _HEAD + "".join(commands) + _TAIL


if __name__ == "__main__":
    print(manifest_text(), end="")
