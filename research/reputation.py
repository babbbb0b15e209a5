"""Source reputation: what kind of source an item comes from (primary, reputable, aggregator, social) and its outlet."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from urllib.parse import urlsplit

from sources import Item


class SourceKind(StrEnum):
    """How close a source is to the facts it reports."""

    PRIMARY = "primary"
    """Papers, official repositories, official blogs and announcements, filings, government sites."""
    REPUTABLE = "reputable"
    """Established news outlets with editors and corrections."""
    SECONDARY = "secondary"
    """Other reporting, blogs and pages."""
    AGGREGATOR = "aggregator"
    """Link sites and reference works that relay others (Hacker News, Google News, Wikipedia)."""
    SOCIAL = "social"
    """Posts by anyone: X, Reddit, Weibo, Zhihu, YouTube..."""

    @property
    def label(self) -> str:
        return _KIND_LABELS[self]


_KIND_LABELS = {
    SourceKind.PRIMARY: "primary source",
    SourceKind.REPUTABLE: "established outlet",
    SourceKind.SECONDARY: "secondary source",
    SourceKind.AGGREGATOR: "aggregator",
    SourceKind.SOCIAL: "social post",
}


def _domains(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PRIMARY_DOMAINS = _domains(
    "arxiv.org github.com github.io huggingface.co openreview.net doi.org aclanthology.org biorxiv.org "
    "medrxiv.org ssrn.com nature.com science.org pnas.org ieee.org acm.org openalex.org semanticscholar.org "
    "pypi.org python.org sec.gov europa.eu who.int un.org openai.com anthropic.com deepmind.google blog.google "
    "ai.google.dev ai.meta.com about.fb.com microsoft.com nvidia.com apple.com deepseek.com mistral.ai x.ai"
)
_PRIMARY_SUFFIXES = (".gov", ".mil", ".edu", ".int", ".gov.uk", ".gov.cn", ".ac.uk", ".ac.cn", ".edu.cn", ".ac.jp")
_OFFICIAL_HOST_PREFIXES = ("blog.", "blogs.", "newsroom.", "press.", "investor.", "investors.", "ir.")
"""A company's own blog or newsroom speaks for the company: a primary source for what it announces."""
_REPUTABLE_DOMAINS = _domains(
    "reuters.com apnews.com bloomberg.com ft.com wsj.com nytimes.com washingtonpost.com bbc.com bbc.co.uk "
    "theguardian.com economist.com cnbc.com npr.org theverge.com techcrunch.com arstechnica.com wired.com "
    "technologyreview.com theinformation.com axios.com semafor.com scmp.com nikkei.com caixinglobal.com "
    "caixin.com lemonde.fr spiegel.de faz.net elpais.com zdnet.com venturebeat.com engadget.com "
    "theregister.com politico.com afp.com"
)
_REPUTABLE_OUTLETS = frozenset(
    {
        "reuters", "associated press", "ap news", "bloomberg", "bloomberg.com", "financial times",
        "the wall street journal", "wsj", "the new york times", "the washington post", "bbc", "bbc news",
        "the guardian", "the economist", "cnbc", "npr", "the verge", "techcrunch", "ars technica", "wired",
        "mit technology review", "the information", "axios", "semafor", "south china morning post",
        "nikkei asia", "caixin global", "le monde", "der spiegel", "zdnet", "venturebeat", "engadget",
        "the register", "politico", "afp",
    }
)  # fmt: skip
"""Outlet names as Google News gives them (its links often stay on news.google.com)."""
_AGGREGATOR_DOMAINS = _domains(
    "news.ycombinator.com news.google.com lobste.rs slashdot.org techmeme.com msn.com yahoo.com "
    "flipboard.com wikipedia.org paperswithcode.com ground.news newsbreak.com"
)
_SOCIAL_DOMAINS = _domains(
    "x.com twitter.com reddit.com weibo.com weibo.cn zhihu.com xiaohongshu.com xhslink.com bilibili.com "
    "douyin.com tiktok.com youtube.com youtu.be facebook.com instagram.com threads.net bsky.app "
    "mastodon.social linkedin.com medium.com substack.com t.me mp.weixin.qq.com discord.com quora.com"
)
_MULTI_TENANT = _domains("github.io substack.com medium.com blogspot.com wordpress.com")
"""Hosts where each subdomain is someone else's site."""
_SOURCE_KINDS: dict[str, SourceKind] = {
    "arxiv": SourceKind.PRIMARY,
    "github": SourceKind.PRIMARY,
    "openalex": SourceKind.PRIMARY,
    "semanticscholar": SourceKind.PRIMARY,
    "hn": SourceKind.AGGREGATOR,
    "wikipedia": SourceKind.AGGREGATOR,
    "x": SourceKind.SOCIAL,
    "reddit": SourceKind.SOCIAL,
    "rsshub": SourceKind.SOCIAL,
}
_SOCIAL_SOURCES = frozenset(name for name, kind in _SOURCE_KINDS.items() if kind is SourceKind.SOCIAL)
_PRIMARY_SOURCES = frozenset(name for name, kind in _SOURCE_KINDS.items() if kind is SourceKind.PRIMARY)


def _host(url: str) -> str:
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""
    for prefix in ("www.", "m.", "amp.", "mobile."):
        host = host.removeprefix(prefix)
    return host


def _in(host: str, domains: frozenset[str]) -> bool:
    labels = host.split(".")
    return any(".".join(labels[i:]) in domains for i in range(len(labels)))


def _site(host: str) -> str:
    """The registrable part of a host, roughly: `blog.reuters.com` and `reuters.com` are one outlet. An address
    (`127.0.0.1`, `::1`) or a single-label host (`localhost`) is its own site, whole."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return host
    labels = host.split(".")
    keep = 3 if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in {"co", "com", "ac", "gov", "org"} else 2
    if ".".join(labels[-2:]) in _MULTI_TENANT:
        keep = 3
    return ".".join(labels[-keep:])


def source_kind(item: Item) -> SourceKind:
    """Classify an item by what it is (a post, a paper) and then by the site its link points to."""
    if item.source in _SOCIAL_SOURCES:
        return SourceKind.SOCIAL
    if item.source in _PRIMARY_SOURCES:
        return SourceKind.PRIMARY
    host = _host(item.url)
    if _in(host, _SOCIAL_DOMAINS):
        return SourceKind.SOCIAL
    if host == "news.google.com" and item.author:
        known = item.author.strip().casefold() in _REPUTABLE_OUTLETS
        return SourceKind.REPUTABLE if known else SourceKind.SECONDARY
    if _in(host, _AGGREGATOR_DOMAINS):
        return SourceKind.AGGREGATOR
    if _in(host, _REPUTABLE_DOMAINS):  # before the prefixes: blogs.reuters.com is still Reuters
        return SourceKind.REPUTABLE
    if _in(host, _PRIMARY_DOMAINS) or host.endswith(_PRIMARY_SUFFIXES) or host.startswith(_OFFICIAL_HOST_PREFIXES):
        return SourceKind.PRIMARY
    return _SOURCE_KINDS.get(item.source, SourceKind.SECONDARY)


def outlet_of(item: Item) -> str:
    """Who published the item, for counting independent outlets: a site, or an account on a social site."""
    host = _host(item.url)
    if (not host or host == "news.google.com") and item.author:
        return item.author.strip().casefold()
    if item.author and (item.source in _SOCIAL_SOURCES or _in(host, _SOCIAL_DOMAINS)):
        return f"{_site(host) or item.source}/{item.author.strip().casefold()}"
    return _site(host) or item.source
