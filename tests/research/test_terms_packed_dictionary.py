"""The IPA dictionary as the container image ships it: its word table gzipped, unpacked on the first Japanese text.

Each test lays out a real dictionary folder the way `docker/slim_venv.py` does (the package's files, `sys.dic.gz`,
`sys.dic` a link to a place to unpack to) and points the `ipadic` package at it.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import ipadic
import pytest

from research import terms

SENTENCE = "東京大学の研究者が新しい人工知能の論文を発表した"


@pytest.fixture(scope="module")
def packed_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real word table gzipped once for the module (fast level: the test is about the layout)."""
    packed = tmp_path_factory.mktemp("packed") / terms.PACKED_IPADIC_TABLE
    with open(Path(ipadic.DICDIR) / "sys.dic", "rb") as table, gzip.open(packed, "wb", compresslevel=1) as out:
        shutil.copyfileobj(table, out, 1 << 20)
    return packed


@pytest.fixture
def fresh_segmenter() -> Iterator[None]:
    terms._japanese_segmenter.cache_clear()
    yield
    terms._japanese_segmenter.cache_clear()


def _image_layout(folder: Path, packed_table: Path, unpack_to: Path) -> Path:
    for part in Path(ipadic.DICDIR).iterdir():
        if part.name != "sys.dic":
            shutil.copy2(part, folder / part.name)
    shutil.copy2(packed_table, folder / terms.PACKED_IPADIC_TABLE)
    (folder / "sys.dic").symlink_to(unpack_to)
    return folder


def _point_ipadic_at(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setattr(ipadic, "DICDIR", str(folder))
    monkeypatch.setattr(ipadic, "MECAB_ARGS", f'-r "{folder / "mecabrc"}" -d "{folder}"')


@pytest.mark.usefixtures("fresh_segmenter")
def test_first_japanese_text_unpacks_the_table_where_sys_dic_links(
    tmp_path: Path, packed_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = terms._japanese_segmenter()(SENTENCE)
    terms._japanese_segmenter.cache_clear()
    target = tmp_path / "data" / "cache" / "ipadic-sys.dic"
    (tmp_path / "dicdir").mkdir()
    folder = _image_layout(tmp_path / "dicdir", packed_table, target)
    _point_ipadic_at(monkeypatch, folder)

    assert not target.exists()
    assert terms._japanese_segmenter()(SENTENCE) == expected
    assert target.read_bytes() == (Path(ipadic.__file__).parent / "dicdir" / "sys.dic").read_bytes()
    assert not [name for name in os.listdir(target.parent) if name.startswith(".")], "a partial file was left"

    # A later process finds it unpacked and does not unpack it again.
    terms._japanese_segmenter.cache_clear()
    unpacked_at = target.stat().st_mtime_ns
    assert terms._japanese_segmenter()(SENTENCE) == expected
    assert target.stat().st_mtime_ns == unpacked_at


@pytest.mark.usefixtures("fresh_segmenter")
def test_where_the_link_cannot_be_written_the_table_goes_to_a_private_temporary_folder(
    tmp_path: Path, packed_table: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    expected = terms._japanese_segmenter()(SENTENCE)
    terms._japanese_segmenter.cache_clear()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data folder should be")  # unwritable for root too
    (tmp_path / "dicdir").mkdir()
    folder = _image_layout(tmp_path / "dicdir", packed_table, blocked / "ipadic-sys.dic")
    _point_ipadic_at(monkeypatch, folder)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))

    assert terms._japanese_segmenter()(SENTENCE) == expected
    assert "could not be unpacked" in caplog.text
    assert [path.name for path in (tmp_path / "tmp").glob("lookout-ipadic-*/sys.dic")] == ["sys.dic"]


_PRIVATE_UNPACK = """
import sys, tempfile
from pathlib import Path
import ipadic
folder, tmp = Path(sys.argv[1]), sys.argv[2]
rc = folder / "mecabrc"
ipadic.DICDIR, ipadic.MECAB_ARGS = str(folder), f'-r "{rc}" -d "{folder}"'
tempfile.tempdir = tmp
from research import terms
assert terms._japanese_segmenter()(sys.argv[3])
print(*Path(tmp).glob("lookout-ipadic-*/sys.dic"))
"""


def test_the_private_temporary_folder_is_removed_when_the_process_exits(tmp_path: Path, packed_table: Path) -> None:
    """A process that had to unpack the table to a private temporary folder removes the folder as it exits (it
    holds 49 MB): a real process, started and ended."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data folder should be")
    (tmp_path / "dicdir").mkdir()
    folder = _image_layout(tmp_path / "dicdir", packed_table, blocked / "ipadic-sys.dic")
    (tmp_path / "tmp").mkdir()

    done = subprocess.run(
        [sys.executable, "-c", _PRIVATE_UNPACK, str(folder), str(tmp_path / "tmp"), SENTENCE],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("/sys.dic"), "the process unpacked to its private folder"
    assert list((tmp_path / "tmp").iterdir()) == [], "the private folder outlived its process"
