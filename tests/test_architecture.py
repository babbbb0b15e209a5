"""The layers as an executable contract: import-linter keeps them, and a deliberate violation is caught.

Also the design's "only through a package's `__init__`" rule: production code reaches another top-level
package through the names that package's `__init__` exports, never through its modules; and no function in
`research/` or `agent/` is longer than `MAX_FUNCTION_LINES` (a longer one is a list of steps that wants names).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "bots", "agent", "monitors", "research", "sources", "storage", "kernel")
SUBPACKAGE_FACES = frozenset({"storage.repositories"})
"""Faces of their own inside a package: the repositories, which `storage`'s face leaves out so that a contract can
forbid them to `bots` and `agent` (only `app` and the services build repositories)."""
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_FUNCTION_LINES = 80
"""About a screen: a function longer than that reads as a list of steps, and each step wants a name."""
SHORT_FUNCTION_PACKAGES = ("research", "monitors", "agent")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_of_the_packages(destination: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, destination / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


def test_the_layer_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout
    assert result.stdout.count("KEPT") >= 3


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("sources/uses_research.py", "import research\n", "Layers"),
        ("storage/uses_sources.py", "import sources\n", "Sources and storage import nothing"),
        ("kernel/uses_storage.py", "import storage\n", "The kernel imports nothing"),
        ("bots/slack/uses_telegram.py", "import bots.telegram.render\n", "The platforms are independent"),
        ("bots/slack/uses_the_face.py", "from bots import TelegramSender\n", "Inside bots, modules import one"),
        ("bots/builds_a_repository.py", "from storage.repositories import ChatRepository\n", "Bots and agent"),
        ("agent/builds_a_repository.py", "import storage.repositories.items\n", "Bots and agent"),
        ("bots/uses_monitors.py", "import monitors\n", "Bots import monitors only"),
    ],
)
def test_a_deliberate_violation_breaks_a_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    tree = _copy_of_the_packages(tmp_path)
    (tree / module).write_text(f'"""A deliberate violation."""\n\n{line}')

    result = _lint_imports(tree)

    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if " BROKEN" in row]
    assert any(row.startswith(contract) for row in broken), result.stdout


def _cross_package_module_imports(path: Path, own: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            target = node.module.split(".")[0]
            if target in PACKAGES and target != own and "." in node.module and node.module not in SUBPACKAGE_FACES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name.split(".")[0]
                if target in PACKAGES and target != own and "." in alias.name and alias.name not in SUBPACKAGE_FACES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import {alias.name}")
    return found


def test_packages_reach_each_other_only_through_their_public_face() -> None:
    violations = [
        violation
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for violation in _cross_package_module_imports(path, package)
    ]
    assert violations == []


def test_every_public_face_imports_what_it_lists() -> None:
    for package in PACKAGES:
        module = __import__(package)
        missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
        assert missing == [], f"{package}.__all__ lists names it does not import: {missing}"


def _long_functions(root: Path, package: Path) -> list[str]:
    """Every function or method under `package` longer than `MAX_FUNCTION_LINES`, as `path:name` (lines counted from
    `def` to the last line of the body, docstring and comments included)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.name}")
    return found


def test_no_function_in_research_monitors_or_agent_is_over_80_lines() -> None:
    long = [name for package in SHORT_FUNCTION_PACKAGES for name in _long_functions(ROOT, ROOT / package)]
    assert long == [], f"split these into named steps of at most {MAX_FUNCTION_LINES} lines: {long}"


def test_the_length_check_finds_a_long_method_and_spares_a_short_one(tmp_path: Path) -> None:
    body = "".join(f"        x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "module.py").write_text(
        f"class Run:\n    async def long(self) -> None:\n{body}        pass\n\n    def short(self) -> None:\n{body}\n"
    )

    assert _long_functions(tmp_path, tmp_path) == ["module.py:long"]
