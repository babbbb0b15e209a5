"""The names `sources` exports, each from the submodule its import names: mypy reads this stub, and
`__init__.py` hands it to `lazy_loader.attach_stub`, which loads each name on first use."""

from .base import Engagement as Engagement
from .base import Item as Item
from .base import SearchQuery as SearchQuery
from .base import Source as Source
from .base import SourceError as SourceError
from .base import SourceErrorKind as SourceErrorKind
from .base import failure_reason as failure_reason
from .base import item_id as item_id
from .config import SourcesConfig as SourcesConfig
from .http import HttpClient as HttpClient
from .http import StoredResponse as StoredResponse
from .page import read_page as read_page
from .registry import DEFAULT_SOURCES as DEFAULT_SOURCES
from .registry import SOURCE_NAMES as SOURCE_NAMES
from .registry import SPEC_HELP as SPEC_HELP
from .registry import build_sources as build_sources
from .registry import feed_factory as feed_factory
from .registry import refused_feeds as refused_feeds
from .registry import resolve_source_specs as resolve_source_specs
from .registry import rsshub_factory as rsshub_factory
from .registry import source_spec as source_spec
from .registry import spec_label as spec_label
from .rsshub import parse_platforms as parse_platforms
from .urls import canonical_url as canonical_url
from .urls import host_of as host_of
from .xmlguard import guard_xml as guard_xml
