"""One error-id format from one function, for every place that tells a person about a failure."""

from __future__ import annotations

import re

from kernel import new_error_id


def test_error_ids_are_eight_lowercase_hex_digits_and_fresh_each_time() -> None:
    ids = {new_error_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[0-9a-f]{8}", error_id) for error_id in ids)
