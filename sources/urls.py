"""Canonical URLs, so the same page found by two sources (or twice) gets the same id."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, quote, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}

TRACKING_PARAMS = frozenset(
    {
        # ad-click ids
        "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "ttclid", "twclid",
        "li_fat_id", "epik", "rb_clickid", "srsltid",
        # mail and marketing automation
        "mc_cid", "mc_eid", "_hsenc", "_hsmi", "__hstc", "__hssc", "__hsfp", "hsctatracking", "mkt_tok",
        "vero_id", "vero_conv", "oly_anon_id", "oly_enc_id", "wt.mc_id", "wt_mc", "_ga", "_gl",
        # social share and referral tags
        "igshid", "igsh", "ref_src", "ref_url", "sr_share", "share_id", "__twitter_impression", "trk",
        "guccounter", "guce_referrer", "guce_referrer_sig", "ncid", "cmpid", "s_cid",
        # Alibaba / Taobao analytics
        "spm", "scm",
    }
)  # fmt: skip
"""Query parameters (compared lower-cased) that identify a click or campaign, not the content."""
TRACKING_PREFIXES = ("utm_", "at_", "pk_", "mtm_", "hmsr", "hmpl", "hmcu", "hmkw", "hmci")

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
# Characters left as they are when escaping a path or query (reserved, unreserved and `%` itself).
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


def is_tracking_param(name: str) -> bool:
    """Whether a query parameter only tracks the click (utm_*, fbclid, gclid, ...)."""
    lowered = name.lower()
    return lowered in TRACKING_PARAMS or lowered.startswith(TRACKING_PREFIXES)


def canonical_url(url: str) -> str:
    """The canonical form of an http(s) URL; anything unparseable or non-web comes back only stripped.

    Lower-cases scheme and host (IDN hosts become punycode), drops default ports, the fragment and
    tracking parameters, sorts the remaining parameters, normalises percent-escapes and dot segments,
    and drops a trailing slash except on the root (servers almost always treat `/a/` and `/a` alike,
    and sources disagree on which they print).
    """
    stripped = url.strip()
    try:
        return _canonical(stripped)
    except (ValueError, UnicodeError):
        return stripped


def _canonical(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return url
    host = _canonical_host(parts.hostname)
    port = parts.port  # raises ValueError on a junk port, caught by the caller
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    # The user part as written ("user:password"): what urllib's username and password properties split it into,
    # without parsing the netloc once more for each (most URLs have none).
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at:
        netloc = f"{userinfo}@{netloc}"
    path = _normalise_escapes(quote(_remove_dot_segments(parts.path or "/"), safe=_PATH_SAFE))
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    query = _canonical_query(parts.query)
    return urlunsplit(SplitResult(scheme, netloc, path, query, ""))


def _canonical_host(hostname: str) -> str:
    host = hostname.lower().rstrip(".")
    if host.isascii():
        return host
    labels = []
    for label in host.split("."):
        labels.append(label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii"))
    return ".".join(labels)


def _canonical_query(query: str) -> str:
    if not query:
        return ""
    kept: list[tuple[str, str]] = []
    for pair in quote(query, safe=_QUERY_SAFE).split("&"):
        if not pair:
            continue
        name, sep, value = pair.partition("=")
        decoded_name = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name.replace("+", " "))
        if is_tracking_param(decoded_name):
            continue
        kept.append((_normalise_escapes(name), sep + _normalise_escapes(value)))
    # Stable sort on the name only: the order of a repeated parameter's values can matter.
    kept.sort(key=lambda pair: pair[0])
    return "&".join(name + rest for name, rest in kept)


def _normalise_escapes(text: str) -> str:
    """Decode escapes of unreserved characters and upper-case the rest (RFC 3986 §6.2.2)."""

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT.sub(fix, text) if "%" in text else text


def _remove_dot_segments(path: str) -> str:
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result


def host_of(url: str, *, strip_www: bool = False) -> str:
    """The lower-cased host name of a URL (no port), or `""` when there is none."""
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    host = host.lower().rstrip(".")
    if strip_www and host.startswith("www."):
        host = host[4:]
    return host


SHORT_URL_CHARS = 60
"""How long a URL may be where a person reads it in a line of text (a failure, a source list)."""


def short_url(url: str, limit: int = SHORT_URL_CHARS) -> str:
    """A URL as a person reads it in a sentence: no scheme, no `www.`, no trailing slash, and, past `limit`
    characters, the middle cut out (`example.com/feeds/…/rss.xml`) so both the host and the file stay visible."""
    text = url.strip()
    for prefix in ("https://", "http://"):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
            break
    if text.lower().startswith("www."):
        text = text[4:]
    text = text.rstrip("/") or text
    if len(text) <= limit:
        return text
    keep = max(limit - 1, 2)
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]
