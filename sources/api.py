"""What every source over the shared HTTP client has in common: the client, the sources' settings, and the rule that
a source missing what it needs (a key) says why and refuses to search."""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from sources.base import SourceError, SourceErrorKind
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


class ApiSource:
    """A source reached through the process's one `HttpClient`, configured by `SourcesConfig`."""

    name: str
    needs_key = False

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        self._client = client
        self._config = config

    def unavailable_reason(self) -> str | None:
        """Why the source cannot search now (a key is missing); None when it can."""
        return None

    def _ensure_available(self) -> None:
        """Raise `SourceError(UNAVAILABLE)` with the reason when the source cannot search."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise SourceError(SourceErrorKind.UNAVAILABLE, reason)
