"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""

from sources.base import (
    Engagement,
    Item,
    SearchQuery,
    Source,
    SourceBatch,
    SourceError,
    SourceErrorKind,
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
    resolve_source_specs,
    rsshub_factory,
    source_status,
)
from sources.retry import Backoff, Sleep, parse_retry_after
from sources.rsshub import parse_platforms
from sources.urls import canonical_url, host_of

__all__ = [
    "DEFAULT_SOURCES",
    "SOURCE_NAMES",
    "SPEC_HELP",
    "Backoff",
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
    "ValidatorStore",
    "build_sources",
    "canonical_url",
    "feed_factory",
    "host_of",
    "item_id",
    "parse_platforms",
    "parse_retry_after",
    "read_page",
    "resolve_source_specs",
    "rsshub_factory",
    "source_status",
    "utc_now",
]
