"""Every source by name: building them from config, parsing `--sources` specs, and listing their status."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal
from urllib.parse import urlsplit

from sources.arxiv import ArxivSource
from sources.base import Source, SourceError, failure_reason
from sources.config import SourcesConfig
from sources.github import GitHubSource
from sources.hn import HackerNewsSource
from sources.http import HttpClient
from sources.news import GoogleNewsSource
from sources.openalex import OpenAlexSource
from sources.reddit import RedditSource
from sources.rss import FeedSource
from sources.rsshub import RssHubSource, parse_platforms
from sources.semanticscholar import SemanticScholarSource
from sources.urls import short_url
from sources.web import WebSearchSource
from sources.wikipedia import WikipediaSource
from sources.x import XSource

SOURCE_NAMES: tuple[str, ...] = (
    "hn",
    "news",
    "arxiv",
    "github",
    "reddit",
    "wikipedia",
    "openalex",
    "semanticscholar",
    "web",
    "x",
    "rsshub",
)
"""Every built-in source with a fixed name; `rss:<url>` adds feeds on top."""
DEFAULT_SOURCES: tuple[str, ...] = ("hn", "news", "arxiv", "github", "wikipedia", "web")
"""A keyless mix: tech discussion, news, papers, code, background and the open web."""
SPEC_HELP = ", ".join((*SOURCE_NAMES, "rss:<feed url>", "rsshub:<platform>+<platform>"))

FeedFactory = Callable[[str], Source]
"""Makes the source for one `rss:<url>` spec."""

_BUILDERS: dict[str, Callable[[HttpClient, SourcesConfig], Source]] = {
    "hn": lambda client, config: HackerNewsSource(client=client, config=config),
    "news": lambda client, config: GoogleNewsSource(client=client, config=config),
    "arxiv": lambda client, config: ArxivSource(client=client, config=config),
    "github": lambda client, config: GitHubSource(client=client, config=config),
    "reddit": lambda client, config: RedditSource(client=client, config=config),
    "wikipedia": lambda client, config: WikipediaSource(client=client, config=config),
    "openalex": lambda client, config: OpenAlexSource(client=client, config=config),
    "semanticscholar": lambda client, config: SemanticScholarSource(client=client, config=config),
    "web": lambda client, config: WebSearchSource(client=client, config=config),
    "x": lambda client, config: XSource(client=client, config=config),
    "rsshub": lambda client, config: RssHubSource(client=client, config=config, platforms=config.rsshub_platforms),
}


class SourcesUnavailableError(ValueError):
    """Sources were asked for by name but are off (missing key or setting)."""

    def __init__(self, off: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{name} is off: {reason}" for name, reason in off))
        self.off = off


def build_sources(*, client: HttpClient, config: SourcesConfig) -> dict[str, Source]:
    """One instance of every named source (keyed ones included; they report why they are off)."""
    return {name: _BUILDERS[name](client, config) for name in SOURCE_NAMES}


def feed_factory(*, client: HttpClient, config: SourcesConfig) -> FeedFactory:
    """The factory `resolve_source_specs` uses for `rss:<url>`: a `FeedSource` on the shared client."""

    def make(feed_url: str) -> Source:
        return FeedSource(client=client, config=config, feed_url=feed_url)

    return make


def rsshub_factory(*, client: HttpClient, config: SourcesConfig) -> Callable[[str], Source]:
    """The factory `resolve_source_specs` uses for `rsshub:<platform>+<platform>`."""

    def make(platforms: str) -> Source:
        return RssHubSource(client=client, config=config, platforms=platforms)

    return make


def _split_specs(spec: str | Sequence[str]) -> list[str]:
    parts: list[str] = []
    for chunk in [spec] if isinstance(spec, str) else spec:
        # A feed URL may itself contain commas, so a chunk starting with `rss:` is never split further.
        stripped = chunk.strip()
        if stripped.lower().startswith("rss:") and not isinstance(spec, str):
            parts.append(stripped)
            continue
        parts.extend(p.strip() for p in stripped.split(",") if p.strip())
    return parts


def resolve_source_specs(
    spec: str | Sequence[str],
    *,
    available: Mapping[str, Source],
    make_feed: FeedFactory | None = None,
    make_rsshub: Callable[[str], Source] | None = None,
    on_unavailable: Literal["raise", "keep"] = "raise",
) -> list[Source]:
    """The sources a spec like `"hn,news,rss:https://x/feed.xml"` names, in order, without repeats.

    `available` is what `build_sources` returned. Unknown names raise `ValueError` listing the valid ones.
    Sources that are off raise `SourcesUnavailableError` (a `ValueError` saying why each is off), or with
    `on_unavailable="keep"` stay in the list, where their `search` fails with the reason. `rss:<url>` needs
    `make_feed` (see `feed_factory`); `rsshub:weibo+zhihu` needs `make_rsshub` (see `rsshub_factory`).
    """
    resolved: list[Source] = []
    seen: set[str] = set()
    unknown: list[str] = []
    for part in _split_specs(spec):
        prefix, _, argument = part.partition(":")
        prefix = prefix.strip().lower()
        key = part if argument else prefix
        if key.lower() in seen:
            continue
        if prefix == "rss" and argument:
            url = argument.strip()
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise ValueError(f"rss:<url> needs an http(s) feed URL, got {url!r}")
            if make_feed is None:
                raise ValueError("rss:<url> sources need a feed factory (sources.registry.feed_factory)")
            source = make_feed(url)
        elif prefix == "rsshub" and argument:
            if make_rsshub is None:
                raise ValueError("rsshub:<platforms> needs an RSSHub factory (sources.registry.rsshub_factory)")
            parse_platforms(argument)  # a clear ValueError for an unknown platform
            source = make_rsshub(argument)
        elif not argument and prefix in available:
            source = available[prefix]
        else:
            unknown.append(part)
            continue
        seen.add(key.lower())
        resolved.append(source)
    if unknown:
        raise ValueError(f"unknown source(s): {', '.join(unknown)}. Valid: {SPEC_HELP}")
    off = [(s.name, reason) for s in resolved if (reason := s.unavailable_reason()) is not None]
    if off and on_unavailable == "raise":
        raise SourcesUnavailableError(off)
    return resolved


def source_spec(source: Source) -> str:
    """How commands and reports name a source: its `spec` where it has one (`rss:<url>`, `rsshub:weibo+zhihu`,
    which tell two feeds apart), else its name (`hn`)."""
    spec = getattr(source, "spec", None)
    return spec if isinstance(spec, str) and spec else source.name


def spec_label(spec: str) -> str:
    """A source spec as a person reads it in a line: `hn`, `rss example.com/feed.xml` (the URL shortened)."""
    prefix, colon, argument = spec.partition(":")
    if colon and prefix.lower() == "rss":
        return f"rss {short_url(argument)}"
    return spec


async def refused_feeds(sources: Iterable[Source]) -> list[str]:
    """Why fetching each of these sources' URLs would be refused, one line per refused source (`rss <url>: why`):
    the fetcher's own SSRF check, run now. Sources without a URL of their own are never refused here."""
    refusals: list[str] = []
    for source in sources:
        check = getattr(source, "check_address", None)
        if check is None:
            continue
        try:
            await check()
        except SourceError as error:
            reason = failure_reason(error.kind, str(error), status=error.status)
            refusals.append(f"{spec_label(source_spec(source))}: {reason}")
    return refusals


def source_status(sources: Mapping[str, Source] | Iterable[Source]) -> list[tuple[str, str | None]]:
    """`(name, why it is off or None)` for each source, for `/sources`-style listings."""
    listed = sources.values() if isinstance(sources, Mapping) else sources
    return [(source.name, source.unavailable_reason()) for source in listed]
