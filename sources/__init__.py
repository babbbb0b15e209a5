"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from sources.base import (
        Engagement,
        Item,
        SearchQuery,
        Source,
        SourceError,
        SourceErrorKind,
        failure_reason,
        item_id,
    )
    from sources.config import SourcesConfig
    from sources.http import HttpClient, StoredResponse
    from sources.page import read_page
    from sources.registry import (
        DEFAULT_SOURCES,
        SOURCE_NAMES,
        SPEC_HELP,
        build_sources,
        feed_factory,
        refused_feeds,
        resolve_source_specs,
        rsshub_factory,
        source_spec,
        spec_label,
    )
    from sources.rsshub import parse_platforms
    from sources.urls import canonical_url, host_of
    from sources.xmlguard import guard_xml

__all__ = [
    "DEFAULT_SOURCES",
    "SOURCE_NAMES",
    "SPEC_HELP",
    "Engagement",
    "HttpClient",
    "Item",
    "SearchQuery",
    "Source",
    "SourceError",
    "SourceErrorKind",
    "SourcesConfig",
    "StoredResponse",
    "build_sources",
    "canonical_url",
    "failure_reason",
    "feed_factory",
    "guard_xml",
    "host_of",
    "item_id",
    "parse_platforms",
    "read_page",
    "refused_feeds",
    "resolve_source_specs",
    "rsshub_factory",
    "source_spec",
    "spec_label",
]

_SUBMODULES = {
    "base": [
        "Engagement",
        "Item",
        "SearchQuery",
        "Source",
        "SourceError",
        "SourceErrorKind",
        "failure_reason",
        "item_id",
    ],
    "config": ["SourcesConfig"],
    "http": ["HttpClient", "StoredResponse"],
    "page": ["read_page"],
    "registry": [
        "DEFAULT_SOURCES",
        "SOURCE_NAMES",
        "SPEC_HELP",
        "build_sources",
        "feed_factory",
        "refused_feeds",
        "resolve_source_specs",
        "rsshub_factory",
        "source_spec",
        "spec_label",
    ],
    "rsshub": ["parse_platforms"],
    "urls": ["canonical_url", "host_of"],
    "xmlguard": ["guard_xml"],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
