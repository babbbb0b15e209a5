"""Markdown from the agent as Slack mrkdwn and as Block Kit messages within Slack's limits."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, NotRequired, TypedDict

from bots.markdown import (
    ELLIPSIS,
    RULE_LINE,
    Block,
    Code,
    CodeBlock,
    Heading,
    Inline,
    ListItem,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Text,
    is_safe_url,
    is_tight,
    parse_markdown,
    utf16_len,
)
from kernel import Button
from research import pack_pieces, split_words

SECTION_TEXT_LIMIT = 3000
"""Characters of a section block's text."""
HEADER_TEXT_LIMIT = 150
"""Characters of a header block's plain text."""
BLOCKS_PER_MESSAGE = 50
"""Blocks in one message."""
MESSAGE_TEXT_LIMIT = 40_000
"""Characters of a message's `text` field; Slack truncates beyond."""
SLACK_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
"""Link schemes rendered as links; anything else stays plain text."""
BUTTON_ACTION_PREFIX = "lookout_button_"
"""Every button we send has an `action_id` starting with this; the frontend listens for it."""

WORD_JOINER = "\u2060"
"""An invisible character put after the "@" of a typed @here, @channel or @everyone, so Slack's automatic parsing
of mrkdwn does not turn words Lookout repeats (a topic, an answer) into a notification to everyone."""

_MARKS = {"b": "*", "i": "_", "s": "~"}
_TYPED_SPECIAL_MENTION = re.compile(r"(?<![\w@])@(?=(?:here|channel|everyone)\b)", re.IGNORECASE)
# One unbreakable unit of mrkdwn: a <link|label>, an escaped character, or a single character.
_ATOM = re.compile(r"<[^<>\n]*>|&(?:amp|lt|gt);|.", re.DOTALL)


class PlainTextObject(TypedDict):
    """A Block Kit text object shown as is."""

    type: Literal["plain_text"]
    text: str
    emoji: bool


class MrkdwnTextObject(TypedDict):
    """A Block Kit text object in Slack's mrkdwn."""

    type: Literal["mrkdwn"]
    text: str


class HeaderBlock(TypedDict):
    """A large bold title line."""

    type: Literal["header"]
    text: PlainTextObject


class SectionBlock(TypedDict):
    """A block of mrkdwn text."""

    type: Literal["section"]
    text: MrkdwnTextObject


class DividerBlock(TypedDict):
    """A horizontal rule."""

    type: Literal["divider"]


class ButtonElement(TypedDict):
    """A button; pressing it sends a block_actions payload carrying `value`."""

    type: Literal["button"]
    text: PlainTextObject
    value: str
    action_id: str


class ActionsBlock(TypedDict):
    """A row of buttons."""

    type: Literal["actions"]
    elements: list[ButtonElement]
    block_id: NotRequired[str]
    """Set for a row a press changes in place (a digest's story row): Slack sends it back with the press."""


SlackBlock = HeaderBlock | SectionBlock | DividerBlock | ActionsBlock


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """One chat.postMessage worth of content: Block Kit blocks and the plain `text` fallback."""

    text: str
    """mrkdwn for notifications and clients without blocks (within Slack's 40,000 characters)."""
    blocks: list[SlackBlock]


def escape_mrkdwn(text: str) -> str:
    """Text shown as written in mrkdwn: the three characters Slack reserves for its own markup escaped (so no
    `<!channel>` or `<@U1>` reaches Slack as markup), and a typed @here/@channel/@everyone kept from notifying."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _TYPED_SPECIAL_MENTION.sub("@" + WORD_JOINER, escaped)


# ---------------------------------------------------------------------------------------------------------------
# mrkdwn


def markdown_to_mrkdwn(text: str) -> str:
    """The markdown as Slack mrkdwn: *bold*, _italic_, ~strike~, `code`, <url|text> links, "•" lists."""
    return "\n\n".join(RULE_LINE if chunk is None else chunk for chunk in _chunks(parse_markdown(text)))


def _chunks(blocks: list[Block], *, in_quote: bool = False) -> list[str | None]:
    """Each block's mrkdwn (a list joined to the line above it); None where a divider goes."""
    groups: list[list[str] | None] = []
    for block in blocks:
        if isinstance(block, Rule):
            groups.append(None)
        elif (rendered := _render_block(block, in_quote=in_quote)).strip():
            last = groups[-1] if groups else None
            if is_tight(block) and last is not None:
                last.append(rendered)
            else:
                groups.append([rendered])
    return [None if group is None else "\n".join(group) for group in groups]


def _render_block(block: Block, *, in_quote: bool) -> str:
    if isinstance(block, Paragraph):
        return _render_inlines(block.inlines, active=frozenset())
    if isinstance(block, Heading):
        return _wrap("*", _render_inlines(block.inlines, active=frozenset({"b"})))
    if isinstance(block, ListItem):
        return "    " * block.depth + block.marker + " " + _render_inlines(block.inlines, active=frozenset())
    if isinstance(block, CodeBlock):
        return f"```\n{escape_mrkdwn(block.code)}\n```" if block.code.strip() else ""
    if isinstance(block, Quote):
        inner = "\n\n".join(RULE_LINE if chunk is None else chunk for chunk in _chunks(block.blocks, in_quote=True))
        if in_quote:  # Slack quotes do not nest: an inner quote joins its parent
            return inner
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
    return RULE_LINE


def _render_inlines(inlines: list[Inline], *, active: frozenset[str]) -> str:
    return "".join(_render_inline(node, active=active) for node in inlines)


def _render_inline(node: Inline, *, active: frozenset[str]) -> str:
    if isinstance(node, Text):
        return escape_mrkdwn(node.text)
    if isinstance(node, Code):
        return f"`{escape_mrkdwn(node.text)}`"
    if isinstance(node, Styled):
        inner = _render_inlines(node.children, active=active | {node.style})
        return inner if node.style in active else _wrap(_MARKS[node.style], inner)
    if not is_safe_url(node.url, schemes=SLACK_LINK_SCHEMES):
        return _render_inlines(node.children, active=active)
    label = " ".join(_plain(node.children).split())
    target = node.url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    return f"<{target}>" if label == node.url else f"<{target}|{escape_mrkdwn(label)}>"


def _plain(inlines: list[Inline]) -> str:
    return "".join(node.text if isinstance(node, Text | Code) else _plain(node.children) for node in inlines)


def _wrap(mark: str, inner: str) -> str:
    """Markers around each line, outside its edge spaces: Slack formats neither across lines nor `* x *`."""
    lines = []
    for line in inner.split("\n"):
        core = line.strip()
        if core:
            start = line.index(core[0])
            line = f"{line[:start]}{mark}{core}{mark}{line[start + len(core) :]}"
        lines.append(line)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Block Kit


def markdown_to_blocks(text: str, *, header: str | None = None) -> list[list[SlackBlock]]:
    """The markdown as Block Kit messages, each at most 50 blocks with sections within 3,000 characters.

    An optional header block opens the first message; `---` becomes a divider. Returns one list of blocks
    per message to send, in order (empty when there is nothing to show).
    """
    blocks: list[SlackBlock] = []
    title = header_text(header) if header else ""
    if title:
        blocks.append(HeaderBlock(type="header", text=PlainTextObject(type="plain_text", text=title, emoji=True)))
    pending: list[str] = []
    for chunk in [*_chunks(parse_markdown(text)), None]:
        if chunk is not None:
            pending.extend(_split_chunk(chunk, SECTION_TEXT_LIMIT))
            continue
        for section_text in pack_pieces(pending, "\n\n", SECTION_TEXT_LIMIT, units=_units):
            blocks.append(SectionBlock(type="section", text=MrkdwnTextObject(type="mrkdwn", text=section_text)))
        pending = []
        if blocks and blocks[-1]["type"] not in {"divider", "header"}:
            blocks.append(DividerBlock(type="divider"))
    if blocks and blocks[-1]["type"] == "divider":
        blocks.pop()
    return [blocks[start : start + BLOCKS_PER_MESSAGE] for start in range(0, len(blocks), BLOCKS_PER_MESSAGE)]


def reply_messages(text: str, *, header: str | None = None, buttons: Sequence[Button] = ()) -> list[SlackMessage]:
    """A reply as the Slack messages to post in order: its blocks (header, sections, dividers), the buttons as
    an actions block at the end, and a fallback `text` per message made of that message's own blocks."""
    messages = markdown_to_blocks(text, header=header)
    rows: dict[int, list[ButtonElement]] = {}
    for n, button in enumerate(buttons):  # one actions block per row the buttons name (else one for all)
        rows.setdefault(button.row if button.row is not None else -1, []).append(button_element(button, n))
    for row in sorted(rows):
        actions = ActionsBlock(type="actions", elements=rows[row])
        if row >= 0:
            actions["block_id"] = f"lookout_row_{row}"
        if messages and len(messages[-1]) < BLOCKS_PER_MESSAGE:
            messages[-1].append(actions)
        else:
            messages.append([actions])
    return [SlackMessage(text=message_fallback(blocks), blocks=blocks) for blocks in messages]


def button_element(button: Button, index: int) -> ButtonElement:
    """A Block Kit button for one of our buttons (action ids must differ within a block)."""
    return ButtonElement(
        type="button",
        text=PlainTextObject(type="plain_text", text=button.label, emoji=True),
        value=button.callback_data,
        action_id=f"{BUTTON_ACTION_PREFIX}{index}",
    )


def message_fallback(blocks: Sequence[SlackBlock]) -> str:
    """The `text` of a message with these blocks: its header and sections as mrkdwn, button labels last."""
    parts: list[str] = []
    for block in blocks:
        if block["type"] == "header":
            parts.append(f"*{escape_mrkdwn(block['text']['text'])}*")
        elif block["type"] == "section":
            parts.append(block["text"]["text"])
        elif block["type"] == "actions":
            parts.append(" · ".join(f"[{escape_mrkdwn(e['text']['text'])}]" for e in block["elements"]))
    return _truncate("\n\n".join(parts), MESSAGE_TEXT_LIMIT, mrkdwn=True) or " "


def plain_text(markdown: str) -> str:
    """What a reader sees of a markdown snippet, without markup (e.g. a digest's title line for a header)."""
    lines: list[str] = []
    for block in parse_markdown(markdown):
        if isinstance(block, Paragraph | Heading | ListItem):
            lines.append(_plain(block.inlines))
        elif isinstance(block, CodeBlock):
            lines.append(block.code)
    return " ".join(" ".join(lines).split())


def blocks_payload(message: list[SlackBlock]) -> list[dict[str, object]]:
    """A message's blocks typed as the plain dicts slack_sdk's `blocks=` parameter is annotated with."""
    return [dict(block) for block in message]


def header_text(header: str) -> str:
    """A header's text on one line, shortened with an ellipsis to Slack's 150 characters."""
    return _truncate(" ".join(header.split()), HEADER_TEXT_LIMIT, mrkdwn=False)


def fallback_text(text: str, *, limit: int = MESSAGE_TEXT_LIMIT) -> str:
    """The markdown as mrkdwn for chat.postMessage's `text` (notifications, fallback), shortened to `limit`."""
    return _truncate(markdown_to_mrkdwn(text), limit, mrkdwn=True)


def _units(text: str) -> int:
    """Length in UTF-16 code units: never less than Slack's character count, whichever way it counts emoji."""
    return utf16_len(text)


def _split_chunk(chunk: str, limit: int) -> list[str]:
    """A block's mrkdwn in pieces of at most `limit` units, cut at lines, then words, never inside a link."""
    if _units(chunk) <= limit:
        return [chunk]
    fence = "```\n"
    if chunk.startswith(fence) and chunk.endswith("\n```"):  # each piece of a code block is fenced again
        body = chunk[len(fence) : -len("\n```")]
        return [f"{fence}{piece}\n```" for piece in _split_lines(body, limit - len(fence) - 4)]
    return _split_lines(chunk, limit)


def _split_lines(text: str, limit: int) -> list[str]:
    lines: list[str] = []
    for line in text.split("\n"):
        if _units(line) <= limit:
            lines.append(line)
            continue
        quote = "> " if line.startswith("> ") else ""  # a quoted line stays quoted in every piece
        width = limit - len(quote)
        first, *rest = split_words(line, width, units=_units, atoms=partial(_atoms, limit=width)) or [""]
        lines.extend([first, *(quote + piece for piece in rest)])
    return pack_pieces(lines, "\n", limit, units=_units)


def _atoms(line: str, limit: int) -> list[str]:
    """A line's mrkdwn as what a cut never falls inside: links, entities, characters; a link longer than a whole
    section cannot stay a link, so its text is kept instead."""
    atoms: list[str] = []
    for atom in _ATOM.findall(line):
        if _units(atom) > limit:
            target, _, label = atom[1:-1].partition("|")
            atoms.extend(_ATOM.findall(label or target))
        else:
            atoms.append(atom)
    return atoms


def _truncate(text: str, limit: int, *, mrkdwn: bool) -> str:
    """Text within `limit` characters, cut at a paragraph, line or word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    for boundary in ("\n\n", "\n", " "):
        position = head.rfind(boundary)
        if position >= (limit - 1) // 2:
            head = head[:position]
            break
    if not mrkdwn:
        return head.rstrip() + ELLIPSIS
    fenced = head.count("```") % 2 == 1
    if fenced:  # room to close the code block
        head = head[: limit - 5]
    opened = head.rfind("<")
    if opened > head.rfind(">"):  # never leave half a <link|label>
        head = head[:opened]
    ampersand = head.rfind("&")
    if ampersand >= 0 and ";" not in head[ampersand:]:
        head = head[:ampersand]
    head = head.rstrip() + ("\n```" if fenced else "")
    return head + ELLIPSIS
