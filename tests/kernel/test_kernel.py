"""The kernel: below every layer (importing it loads nothing of Lookout's), and the one wording of an error id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernel import apology, error_reference, new_error_id, utc_now

ROOT = Path(__file__).resolve().parents[2]
LOOKOUT_PACKAGES = ("app", "bots", "agent", "monitors", "research", "sources", "storage")


def test_importing_the_kernel_loads_nothing_of_lookouts() -> None:
    script = (
        "import json, sys\nimport kernel\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({LOOKOUT_PACKAGES!r}))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )

    assert json.loads(result.stdout) == []


def test_an_apology_names_the_error_id_and_nothing_else() -> None:
    error_id = new_error_id()

    text = apology(error_id)

    assert re.fullmatch(r"Something went wrong on my side \(error id [0-9a-f]{8}\)\. Try again later\.", text)
    assert error_id in text


def test_an_error_reference_is_appended_only_when_there_is_an_id() -> None:
    assert "The run failed" + error_reference("3f9a1c2e") == "The run failed (error id 3f9a1c2e)"
    assert error_reference(None) == "" and error_reference("") == ""


def test_the_real_clock_is_aware_and_now() -> None:
    now = utc_now()

    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)
