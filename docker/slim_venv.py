"""Slims the image's virtual environment in the build stage, each cut checked before the build goes on (issue #28).

Run by the Dockerfile as `python docker/slim_venv.py VENV` after `uv sync`, with the venv's own interpreter. It:

- strips the symbol tables of the compiled extension modules (`strip --strip-unneeded`), never the libraries that
  auditwheel bundled in `*.libs/` folders (patchelf rewrote those, and strip can corrupt such files). Every module
  that imported before is imported again after, in a fresh interpreter; one that no longer does gets its original
  back and is named, so a strip never costs a module.
- turns third-party packages into bytecode only: each `.py` compiled to a legacy `.pyc` beside it (`compileall -b`)
  and the `.py` removed (a `.py` that does not compile stays). Lookout's own packages and `KEEP_SOURCES` keep their
  sources with bytecode in `__pycache__`: pydantic reads attribute docstrings from the source, and tracebacks of
  Lookout's code keep their lines. The cost: a traceback inside a library shows file and line, not the line's text.

- removes what only builds or type-checks against a library: type stubs (`.pyi`) and C/Cython sources and headers
  (fontTools ships 6 MB of `.c`), except cffi's, which it reads when it compiles.
- cuts wordfreq's frequency lists to the buckets Lookout reads: `research.terms` reads each list only down to
  `RARE_FREQUENCY` (rarer words score as unlisted), so the rarer buckets, two thirds of each file, are never read.
  Each list is read by `research.terms` itself before and after, and must give the same words and frequencies.

- ships the IPA dictionary's word table (`ipadic/dicdir/sys.dic`, 49 MB) gzipped (12 MB) as `sys.dic.gz`, with
  `sys.dic` a link to `IPADIC_UNPACKED`: `research.terms` unpacks it there on the first Japanese text, once for
  every later container that keeps the data volume (a folder it cannot write: a private temporary one instead).
  The cost: ~0.3 s and 49 MB of the data volume at that first Japanese text.

It prints what each cut saved and exits non-zero when a check fails.
"""

from __future__ import annotations

import compileall
import gzip
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OWN_PACKAGES = ("app", "bots", "agent", "monitors", "research", "sources", "storage", "kernel")
"""Lookout's packages: sources kept (attribute docstrings are read from them; their tracebacks stay readable)."""

KEEP_SOURCES = ("anyio", "apprise", "vaderSentiment")
"""Libraries that read their own `.py` files at run time: anyio builds its lazy imports from its `__init__.py` source
(`inspect.getsource`; without it, it imports all of itself at once), apprise finds its plugins by listing `*.py`
files, vaderSentiment finds its lexicon beside `inspect.getsourcefile` of itself (from bytecode, the file name it was
compiled under: right only when compiled at its final absolute path)."""

EXTENSION_SUFFIXES = (".so",)
"""Compiled extension modules end so on Linux (`name.cpython-3XX-….so`, `name.abi3.so`)."""


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def _extension_modules(site: Path) -> dict[str, Path]:
    """Each extension module outside the `*.libs` folders, by its dotted module name."""
    modules: dict[str, Path] = {}
    for path in sorted(site.rglob("*.so")):
        relative = path.relative_to(site)
        if any(part.endswith(".libs") for part in relative.parts) or not path.is_file():
            continue
        stem = relative.name.split(".", 1)[0]
        dotted = ".".join([*relative.parent.parts, stem])
        if all(part.isidentifier() for part in dotted.split(".")):
            modules[dotted] = path
    return modules


def _importable(names: list[str]) -> set[str]:
    """The modules of `names` that import, each tried in one fresh interpreter (a module's import failing is kept
    from the others')."""
    script = (
        "import importlib, json, sys\n"
        "ok = []\n"
        "for name in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException:\n"
        "        continue\n"
        "    ok.append(name)\n"
        "print(json.dumps(ok))\n"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", script], input=json.dumps(names), capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def strip_extensions(site: Path) -> None:
    """Strips every extension module; puts back any that no longer imports."""
    strip = shutil.which("strip")
    if strip is None:
        raise SystemExit("strip (binutils) is missing in the build stage")
    modules = _extension_modules(site)
    before = _importable(list(modules))
    size_before = sum(path.stat().st_size for path in modules.values())
    with tempfile.TemporaryDirectory() as backup_dir:
        backup = Path(backup_dir)
        for name, path in modules.items():
            shutil.copy2(path, backup / name)
        subprocess.run([strip, "--strip-unneeded", *map(str, modules.values())], check=True)  # noqa: S603
        after = _importable(sorted(before))
        broken = sorted(before - after)
        for name in broken:
            shutil.copy2(backup / name, modules[name])
    if broken and _importable(broken) != set(broken):
        raise SystemExit(f"extension modules broken by strip and not restored: {broken}")
    size_after = sum(path.stat().st_size for path in modules.values())
    print(
        f"strip: {len(modules)} extension modules, {len(before)} import before and after, "
        f"{_megabytes(size_before)} -> {_megabytes(size_after)}; kept unstripped: {broken or 'none'}"
    )


BUILD_FILES = ("*.pyi", "*.pyx", "*.pxd", "*.c", "*.h", "*.cpp", "*.hpp")
"""Files that only a compiler or a type checker reads."""


def drop_build_files(site: Path) -> None:
    """Type stubs and C/Cython sources of third-party packages (cffi's kept)."""
    removed = 0
    for pattern in BUILD_FILES:
        for path in site.rglob(pattern):
            top = path.relative_to(site).parts[0]
            if top in OWN_PACKAGES or top == "cffi" or not path.is_file():
                continue
            removed += path.stat().st_size
            path.unlink()
    print(f"build files: {_megabytes(removed)} of type stubs and C/Cython sources removed")


def _python_size(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*.py*") if path.is_file() and path.suffix in (".py", ".pyc"))


def bytecode_only(site: Path) -> None:
    """Third-party packages as legacy `.pyc` without `.py`; own packages and `KEEP_SOURCES` with sources."""
    keep = {*OWN_PACKAGES, *KEEP_SOURCES}
    size_before = _python_size(site)
    compiled_only = 0
    for entry in sorted(site.iterdir()):
        name = entry.name.removesuffix(".py")
        if entry.name.endswith((".dist-info", ".pth")) or entry.name == "__pycache__":
            continue
        if name in keep:
            if not compileall.compile_dir(entry, quiet=1, workers=0):
                raise SystemExit(f"{entry.name}: its sources do not compile")
            continue
        if entry.is_dir():
            compileall.compile_dir(entry, quiet=2, legacy=True, workers=0)
            sources = list(entry.rglob("*.py"))
            for cache in list(entry.rglob("__pycache__")):
                shutil.rmtree(cache)
        elif entry.suffix == ".py":
            compileall.compile_file(entry, quiet=2, legacy=True)
            sources = [entry]
        else:
            continue
        for source in sources:
            if source.with_suffix(".pyc").is_file():
                source.unlink()
                compiled_only += 1
    shutil.rmtree(site / "__pycache__", ignore_errors=True)
    print(
        f"bytecode only: {compiled_only} third-party modules as .pyc without .py; "
        f".py + .pyc {_megabytes(size_before)} -> {_megabytes(_python_size(site))}"
    )


def cut_word_lists(site: Path) -> None:
    """wordfreq's lists without the buckets `research.terms` never reads; each read the same before and after."""
    import msgpack

    from research import terms

    lists = sorted((site / "wordfreq" / "data").glob("*_*.msgpack.gz"))
    lists = [path for path in lists if not path.name.startswith("_")]
    size_before = sum(path.stat().st_size for path in lists)
    compared = 0
    for path in lists:
        language = path.name.split(".")[0].partition("_")[2]
        terms._wordlists.cache_clear()
        terms._frequencies.cache_clear()
        before = terms._frequencies(language) if terms._wordlists().get(language) == path else None
        with gzip.open(path, "rb") as packed:
            unpacker = msgpack.Unpacker(packed, raw=False)
            buckets = unpacker.read_array_header() - 1
            header = unpacker.unpack()
            kept = [unpacker.unpack() for _ in range(min(buckets, terms._KEPT_CENTIBELS))]
        packer = msgpack.Packer()
        cut = path.with_suffix(".cut")
        with gzip.open(cut, "wb", compresslevel=9) as out:
            out.write(packer.pack_array_header(len(kept) + 1))
            out.write(packer.pack(header))
            for bucket in kept:
                out.write(packer.pack(bucket))
        cut.replace(path)
        if before is not None:
            terms._frequencies.cache_clear()
            after = terms._frequencies(language)
            if (before._hashes, before._buckets) != (after._hashes, after._buckets):
                raise SystemExit(f"{path.name}: research.terms reads other words after the cut")
            compared += 1
    if not compared:
        raise SystemExit(f"research.terms reads no list of {site / 'wordfreq'}: nothing was compared")
    size_after = sum(path.stat().st_size for path in lists)
    print(
        f"wordfreq: {len(lists)} lists cut to {terms._KEPT_CENTIBELS} buckets, "
        f"{_megabytes(size_before)} -> {_megabytes(size_after)}; research.terms reads the same words from all "
        f"{compared} it reads"
    )


IPADIC_UNPACKED = "/data/cache/ipadic/sys.dic"
"""Where the image's Japanese word table is unpacked: under the data volume (`DATA_DIR` in the Dockerfile), which
the unprivileged user owns and which outlives the container."""


def pack_japanese_dictionary(site: Path) -> None:
    """`sys.dic` gzipped beside a link to where `research.terms` unpacks it (see the module docstring)."""
    from research.terms import PACKED_IPADIC_TABLE

    table = site / "ipadic" / "dicdir" / "sys.dic"
    packed = table.with_name(PACKED_IPADIC_TABLE)
    size = table.stat().st_size
    with table.open("rb") as source, gzip.open(packed, "wb", compresslevel=9) as out:
        shutil.copyfileobj(source, out, 1 << 20)
    with gzip.open(packed, "rb") as check, table.open("rb") as original:
        while block := original.read(1 << 20):
            if check.read(len(block)) != block:
                raise SystemExit(f"{packed}: does not unpack to {table}")
    table.unlink()
    table.symlink_to(IPADIC_UNPACKED)
    print(
        f"ipadic: sys.dic {_megabytes(size)} -> {packed.name} {_megabytes(packed.stat().st_size)}, "
        f"unpacked to {IPADIC_UNPACKED} on first use"
    )


def main() -> None:
    venv = Path(sys.argv[1])
    (site,) = venv.glob("lib/python3*/site-packages")
    strip_extensions(site)
    cut_word_lists(site)
    pack_japanese_dictionary(site)
    drop_build_files(site)
    bytecode_only(site)
    importlib.invalidate_caches()
    # The service's first import still works from bytecode alone.
    subprocess.run([str(venv / "bin" / "lookout"), "--help"], check=True, stdout=subprocess.DEVNULL)  # noqa: S603


if __name__ == "__main__":
    main()
