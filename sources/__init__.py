"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""

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
