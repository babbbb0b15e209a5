"""What every source over the shared HTTP client has in common: the client, the sources' settings, and the rule that
a source missing what it needs (a key) says why and refuses to search."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, SecretStr, ValidationError

from sources.base import Item, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient


def secret_text(secret: SecretStr | None) -> str:
    """A configured secret's text ("" when none is set)."""
    return secret.get_secret_value() if secret is not None else ""


def json_object(content: bytes, *, who: str) -> dict[str, Any]:
    """A JSON API's answer as an object; `SourceError(BAD_RESPONSE)` naming `who` for anything else."""
    try:
        document = json.loads(content)
    except ValueError:
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"{who} returned something other than JSON") from None
    if not isinstance(document, dict):
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"{who} returned an unexpected document")
    return document


_ModelT = TypeVar("_ModelT", bound=BaseModel)


def parsed_items(
    raws: Iterable[object], model: type[_ModelT], to_item: Callable[[_ModelT], Item]
) -> tuple[list[Item], int]:
    """An API page's records as items, and how many were malformed (skipped, never failing the page)."""
    items: list[Item] = []
    skipped = 0
    for raw in raws:
        try:
            items.append(to_item(model.model_validate(raw)))
        except (ValidationError, ValueError):
            skipped += 1
    return items, skipped


class ApiSource:
    """A source reached through the process's one `HttpClient`, configured by `SourcesConfig`."""

    name: str
    needs_key = False
    key_setting: ClassVar[str | None] = None
    """The `SourcesConfig` field holding the source's key or token (None: it takes none)."""
    missing_key: ClassVar[str] = ""
    """Why the source cannot search while `needs_key` and the key is not set (names the setting)."""

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        self._client = client
        self._config = config

    def unavailable_reason(self) -> str | None:
        """Why the source cannot search now (a key is missing); None when it can."""
        return self.missing_key if self.needs_key and self.key_setting and not self._key() else None

    def _key(self) -> str:
        """The configured key or token ("" when none is set)."""
        secret: SecretStr | None = getattr(self._config, self.key_setting) if self.key_setting else None
        return secret_text(secret)

    def _without_key(self, error: SourceError, *, kind: SourceErrorKind | None = None) -> SourceError:
        """`error` again with the key scrubbed from its message, as written and URL-quoted (the client's messages
        quote URLs, where a key may travel), and `kind` instead of its own when given."""
        message, key = str(error), self._key()
        if key:
            for form in {key, quote(key, safe=""), quote_plus(key)}:
                message = message.replace(form, "***")
        return SourceError(kind or error.kind, message, status=error.status, retry_after=error.retry_after)

    def _ensure_available(self) -> None:
        """Raise `SourceError(UNAVAILABLE)` with the reason when the source cannot search."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise SourceError(SourceErrorKind.UNAVAILABLE, reason)
