"""Tests of `sources/`: the HTTP client, SSRF guard, URLs, page reader and each source against local fakes."""
