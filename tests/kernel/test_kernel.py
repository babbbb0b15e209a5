"""The kernel: below every layer (importing it loads nothing of Lookout's), and the one wording of an error id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kernel
from kernel import apology, error_reference, new_error_id, utc_now

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_kernel_loads_nothing_of_lookouts() -> None:
    # Lookout's other packages are the kernel's siblings (named from the kernel's own name, whatever its parent).
    parent = kernel.__name__.removesuffix("kernel")
    home = Path(kernel.__file__).resolve().parents[1]
    siblings = sorted(
        parent + path.parent.name
        for path in home.glob("*/__init__.py")
        if path.parent.name not in ("kernel", "tests", "bench")
    )
    assert len(siblings) >= 7
    script = (
        f"import json, sys\nimport {kernel.__name__}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({parent!r}) "
        f"and m.removeprefix({parent!r}).split('.')[0] in {[s.removeprefix(parent) for s in siblings]!r})))\n"
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
