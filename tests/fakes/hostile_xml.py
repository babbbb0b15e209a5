"""Hostile XML documents, as feeds and as OPML files, for the tests and bench/hostile_xml.py.

Each is the classic attack at the size issue #30 measured: quadratic blow-up (an 8 KB entity referenced 15,000
times: 85 KB on disk, 120 MB expanded), billion laughs, an external entity (XXE) and an external DTD pointing at a
server the test runs (so a fetch would show up there), 100,000-level nesting, and a 50 MB body. The names and
titles carry `Zephyr` so a test can assert nothing of them reached a chat, a digest or an export.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["feed", "opml"]

HOSTILE_NAMES = ("quadratic", "billion_laughs", "xxe", "external_dtd", "parameter_entity", "deep_nesting", "50mb")
"""Every hostile document `hostile_document` makes."""
MARKER = "Zephyr"
"""In every hostile document's titles: it must never reach a chat, digest or export."""


def _wrap(kind: Kind, doctype: str, title: str, *, inner: str = "") -> str:
    if kind == "feed":
        return (
            f'<?xml version="1.0" encoding="utf-8"?>{doctype}<rss version="2.0"><channel><title>{MARKER}</title>'
            f"<link>https://zephyr.example/</link><item><title>{MARKER} {title}</title>"
            f"<link>https://zephyr.example/1</link><description>{inner}{MARKER} deepseek</description></item>"
            "</channel></rss>"
        )
    return (
        f'<?xml version="1.0" encoding="utf-8"?>{doctype}<opml version="2.0"><head><title>{MARKER}</title></head>'
        f'<body><outline text="{MARKER} {title}" title="{MARKER} {title}">{inner}'
        f'<outline type="rss" text="z" xmlUrl="https://zephyr.example/feed.xml"/></outline></body></opml>'
    )


def hostile_document(name: str, kind: Kind, *, dtd_url: str = "http://127.0.0.1:9/evil.dtd") -> bytes:
    """The hostile document `name` (one of `HOSTILE_NAMES`) as a feed or an OPML file; `dtd_url` is where the
    external entity, DTD and parameter entity point (a server that records requests, in tests)."""
    match name:
        case "quadratic":
            doctype = f'<!DOCTYPE r [<!ENTITY big "{"x" * 8192}">]>'
            return _wrap(kind, doctype, "&big;", inner="&big;" * 15_000).encode()
        case "billion_laughs":
            entities = ['<!ENTITY lol "lol">']
            for level in range(1, 10):
                below = "lol" if level == 1 else f"lol{level - 1}"
                entities.append(f'<!ENTITY lol{level} "{f"&{below};" * 10}">')
            return _wrap(kind, f"<!DOCTYPE r [{''.join(entities)}]>", "laughs &lol9;").encode()
        case "xxe":
            return _wrap(kind, f'<!DOCTYPE r [<!ENTITY xxe SYSTEM "{dtd_url}">]>', "&xxe;").encode()
        case "external_dtd":
            return _wrap(kind, f'<!DOCTYPE r SYSTEM "{dtd_url}">', "&send;").encode()
        case "parameter_entity":
            return _wrap(kind, f'<!DOCTYPE r [<!ENTITY % dtd SYSTEM "{dtd_url}"> %dtd;]>', "pe").encode()
        case "deep_nesting":
            return _wrap(kind, "", "deep", inner="<a>" * 100_000 + "</a>" * 100_000).encode()
        case "50mb":
            return _wrap(kind, "", "big", inner="<p>padding</p>" * (50_000_000 // 14)).encode()
    raise ValueError(f"no hostile document named {name!r}")
