"""A strict reader of Telegram's HTML parse mode, standing in for the Bot API's "can't parse entities" check."""

from __future__ import annotations

import re
from html.parser import HTMLParser

ALLOWED_TAGS = frozenset({"b", "i", "u", "s", "code", "pre", "a", "blockquote"})
# What Telegram accepts between tags: escaped text (its four named entities or numeric ones) and tags.
_LEXEME = re.compile(r"<(/?)([a-z]+)((?: [a-z-]+=\"[^\"<>]*\")*)>|&(?:amp|lt|gt|quot|#\d+);|[^<>&]+")


class TelegramHTMLError(AssertionError):
    """The markup would be refused (or mangled) by Telegram."""


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _NestingChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            raise TelegramHTMLError(f"unsupported tag <{tag}>")
        if tag == "a" and (len(attrs) != 1 or attrs[0][0] != "href" or not attrs[0][1]):
            raise TelegramHTMLError(f"<a> needs exactly one href: {attrs}")
        if tag == "code" and attrs and not (self.stack[-1:] == ["pre"] and attrs[0][0] == "class"):
            raise TelegramHTMLError("only <pre><code class=...> may carry a class")
        if tag == "blockquote" and "blockquote" in self.stack:
            raise TelegramHTMLError("blockquotes cannot nest")
        if tag == "pre" and self.stack:
            raise TelegramHTMLError(f"<pre> inside <{self.stack[-1]}>")
        if tag == "code" and self.stack[-1:] != ["pre"] and {"code", "pre", "a"} & set(self.stack):
            raise TelegramHTMLError("code inside code, pre or a link")
        if (self.stack and self.stack[-1] == "code") or (self.stack[-1:] == ["pre"] and tag != "code"):
            raise TelegramHTMLError(f"<{tag}> inside code")
        if tag == "a" and "a" in self.stack:
            raise TelegramHTMLError("link inside a link")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            raise TelegramHTMLError(f"</{tag}> does not close the open {self.stack}")
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_like_telegram(markup: str) -> str:
    """The visible text of `markup`, or TelegramHTMLError if any character or tag is out of place."""
    position = 0
    while position < len(markup):
        lexeme = _LEXEME.match(markup, position)
        if lexeme is None:
            raise TelegramHTMLError(f"unescaped {markup[position]!r} at {position}: {markup[position:][:40]!r}")
        position = lexeme.end()
    checker = _NestingChecker()
    checker.feed(markup)
    checker.close()
    if checker.stack:
        raise TelegramHTMLError(f"tags left open: {checker.stack}")
    return "".join(checker.text)


def squeeze(text: str) -> str:
    """Text without any whitespace, to compare what is visible regardless of where messages were cut."""
    return "".join(text.split())
