"""The image's build step `docker/slim_venv.py` on a small site-packages folder of its own: which packages lose
their sources, which keep them, that bytecode alone still imports, and which build files go."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def slim_venv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slim_venv", ROOT / "docker" / "slim_venv.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_third_party_code_becomes_bytecode_only_and_still_imports(tmp_path: Path, slim_venv: ModuleType) -> None:
    site = tmp_path / "site-packages"
    _write(site / "somelib" / "__init__.py", '"""A library."""\nfrom somelib.core import answer\n')
    _write(site / "somelib" / "core.py", 'def answer() -> int:\n    """The answer."""\n    return 42\n')
    _write(site / "somelib" / "broken.py", "def (:\n")  # does not compile: stays as it is
    _write(site / "single.py", "VALUE = 'one file'\n")
    _write(site / "anyio" / "__init__.py", "LAZY = True\n")  # reads its own source: kept
    _write(site / "research" / "__init__.py", "OWN = True\n")  # Lookout's own: kept
    _write(site / "somelib-1.0.dist-info" / "RECORD", "somelib/__init__.py,,\n")

    slim_venv.bytecode_only(site)

    assert sorted(p.name for p in (site / "somelib").iterdir()) == ["__init__.pyc", "broken.py", "core.pyc"]
    assert not (site / "single.py").exists() and (site / "single.pyc").is_file()
    for kept in ("anyio", "research"):
        assert (site / kept / "__init__.py").is_file()
        assert list((site / kept / "__pycache__").glob("__init__.*.pyc")), f"{kept} has no bytecode"
    assert (site / "somelib-1.0.dist-info" / "RECORD").is_file()

    probe = "import somelib, single; print(somelib.answer(), single.VALUE, somelib.core.answer.__doc__)"
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {probe}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["42", "one", "file", "The", "answer."]


def test_type_stubs_and_c_sources_go_except_cffi_and_own(tmp_path: Path, slim_venv: ModuleType) -> None:
    site = tmp_path / "site-packages"
    for name in ("fontTools/cu2qu/cu2qu.c", "lxml/includes/tree.h", "numpy/__init__.pyi", "yarl/_quoting.pyx"):
        _write(site / name, "source")
    for name in ("cffi/parse_c_type.h", "research/types.pyi", "fontTools/__init__.py", "lxml/etree.pyx.txt"):
        _write(site / name, "kept")

    slim_venv.drop_build_files(site)

    left = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert left == ["cffi/parse_c_type.h", "fontTools/__init__.py", "lxml/etree.pyx.txt", "research/types.pyi"]


def test_extension_modules_are_named_by_their_import_path_outside_the_libs_folders(
    tmp_path: Path, slim_venv: ModuleType
) -> None:
    site = tmp_path / "site-packages"
    for name in (
        "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
        "Stemmer.cpython-311-x86_64-linux-gnu.so",
        "primp/primp.abi3.so",
        "numpy.libs/libscipy_openblas64_-1234.so",  # auditwheel's: never stripped
    ):
        _write(site / name, "elf")

    assert sorted(slim_venv._extension_modules(site)) == ["Stemmer", "numpy._core._multiarray_umath", "primp.primp"]
