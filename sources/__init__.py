"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from sources.base import (
        PRIVATE_URLS_SETTING,
        Engagement,
        Item,
        SearchQuery,
        Source,
        SourceBatch,
        SourceError,
        SourceErrorKind,
        failure_reason,
        item_id,
        utc_now,
    )
    from sources.config import SourcesConfig
    from sources.http import HostPolicy, HttpClient, HttpResponse, MemoryValidatorStore, StoredResponse, ValidatorStore
    from sources.page import Page, read_page
    from sources.registry import (
        DEFAULT_SOURCES,
        SOURCE_NAMES,
        SPEC_HELP,
        SourcesUnavailableError,
        build_sources,
        feed_factory,
        refused_feeds,
        resolve_source_specs,
        rsshub_factory,
        source_spec,
        source_status,
        spec_label,
    )
    from sources.retry import Backoff, Sleep, parse_retry_after
    from sources.rsshub import parse_platforms
    from sources.urls import canonical_url, host_of, short_url
    from sources.xmlguard import MAX_XML_DEPTH, MAX_XML_ITEMS, CheckedXml, UnsafeXml, guard_xml

__all__ = [
    "DEFAULT_SOURCES",
    "MAX_XML_DEPTH",
    "MAX_XML_ITEMS",
    "PRIVATE_URLS_SETTING",
    "SOURCE_NAMES",
    "SPEC_HELP",
    "Backoff",
    "CheckedXml",
    "Engagement",
    "HostPolicy",
    "HttpClient",
    "HttpResponse",
    "Item",
    "MemoryValidatorStore",
    "Page",
    "SearchQuery",
    "Sleep",
    "Source",
    "SourceBatch",
    "SourceError",
    "SourceErrorKind",
    "SourcesConfig",
    "SourcesUnavailableError",
    "StoredResponse",
    "UnsafeXml",
    "ValidatorStore",
    "build_sources",
    "canonical_url",
    "failure_reason",
    "feed_factory",
    "guard_xml",
    "host_of",
    "item_id",
    "parse_platforms",
    "parse_retry_after",
    "read_page",
    "refused_feeds",
    "resolve_source_specs",
    "rsshub_factory",
    "short_url",
    "source_spec",
    "source_status",
    "spec_label",
    "utc_now",
]

_SUBMODULES = {
    "base": [
        "Engagement",
        "Item",
        "PRIVATE_URLS_SETTING",
        "SearchQuery",
        "Source",
        "SourceBatch",
        "SourceError",
        "SourceErrorKind",
        "failure_reason",
        "item_id",
        "utc_now",
    ],
    "config": ["SourcesConfig"],
    "http": ["HostPolicy", "HttpClient", "HttpResponse", "MemoryValidatorStore", "StoredResponse", "ValidatorStore"],
    "page": ["Page", "read_page"],
    "registry": [
        "DEFAULT_SOURCES",
        "SOURCE_NAMES",
        "SPEC_HELP",
        "SourcesUnavailableError",
        "build_sources",
        "feed_factory",
        "refused_feeds",
        "resolve_source_specs",
        "rsshub_factory",
        "source_spec",
        "source_status",
        "spec_label",
    ],
    "retry": ["Backoff", "Sleep", "parse_retry_after"],
    "rsshub": ["parse_platforms"],
    "urls": ["canonical_url", "host_of", "short_url"],
    "xmlguard": ["CheckedXml", "MAX_XML_DEPTH", "MAX_XML_ITEMS", "UnsafeXml", "guard_xml"],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
