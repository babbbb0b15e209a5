"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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

_SUBMODULE_OF = {
    "Engagement": "base",
    "Item": "base",
    "PRIVATE_URLS_SETTING": "base",
    "SearchQuery": "base",
    "Source": "base",
    "SourceBatch": "base",
    "SourceError": "base",
    "SourceErrorKind": "base",
    "failure_reason": "base",
    "item_id": "base",
    "utc_now": "base",
    "SourcesConfig": "config",
    "HostPolicy": "http",
    "HttpClient": "http",
    "HttpResponse": "http",
    "MemoryValidatorStore": "http",
    "StoredResponse": "http",
    "ValidatorStore": "http",
    "Page": "page",
    "read_page": "page",
    "DEFAULT_SOURCES": "registry",
    "SOURCE_NAMES": "registry",
    "SPEC_HELP": "registry",
    "SourcesUnavailableError": "registry",
    "build_sources": "registry",
    "feed_factory": "registry",
    "refused_feeds": "registry",
    "resolve_source_specs": "registry",
    "rsshub_factory": "registry",
    "source_spec": "registry",
    "source_status": "registry",
    "spec_label": "registry",
    "Backoff": "retry",
    "Sleep": "retry",
    "parse_retry_after": "retry",
    "parse_platforms": "rsshub",
    "canonical_url": "urls",
    "host_of": "urls",
    "short_url": "urls",
    "CheckedXml": "xmlguard",
    "MAX_XML_DEPTH": "xmlguard",
    "MAX_XML_ITEMS": "xmlguard",
    "UnsafeXml": "xmlguard",
    "guard_xml": "xmlguard",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
