"""The IPA dictionary as the container image ships it: its word table gzipped, unpacked on the first Japanese text.

Each test lays out a real dictionary folder the way `docker/slim_venv.py` does (the package's files, `sys.dic.gz`,
`sys.dic` a link to a place to unpack to) and points the `ipadic` package at it.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import ipadic
import pytest

from kernel import THIS_HOST
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


_UNPACK_AND_WAIT = """
import sys, tempfile, time
from pathlib import Path
import ipadic
folder, tmp = Path(sys.argv[1]), sys.argv[2]
rc = folder / "mecabrc"
ipadic.DICDIR, ipadic.MECAB_ARGS = str(folder), f'-r "{rc}" -d "{folder}"'
tempfile.tempdir = tmp
from research import terms
assert terms._japanese_segmenter()(sys.argv[3])
print(*Path(tmp).glob("lookout-ipadic-*/sys.dic"), flush=True)
time.sleep(600)
"""


def test_a_killed_processs_private_folder_is_removed_by_the_next_one_and_a_live_processs_is_kept(
    tmp_path: Path, packed_table: Path
) -> None:
    """SIGKILL leaves no chance to remove the private folder (49 MB): the next process that unpacks to the temporary
    folder removes it, named after a process that no longer runs, and keeps the folder of a process still running."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data folder should be")
    (tmp_path / "dicdir").mkdir()
    folder = _image_layout(tmp_path / "dicdir", packed_table, blocked / "ipadic-sys.dic")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = [sys.executable, "-c", _UNPACK_AND_WAIT, str(folder), str(tmp), SENTENCE]
    killed = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    alive = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert killed.stdout is not None and alive.stdout is not None
        killed_line, alive_line = killed.stdout.readline(), alive.stdout.readline()
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=30) == -signal.SIGKILL
        left = Path(next(line for line in killed_line.split() if f"-{killed.pid}-" in line)).parent
        kept = Path(next(line for line in alive_line.split() if f"-{alive.pid}-" in line)).parent
        assert left.is_dir(), "the killed process's folder was left behind"
        unrelated = tmp / "lookout-ipadic-abc12345"  # not one of ours by its name (no process id): kept
        unrelated.mkdir()

        done = subprocess.run(
            [sys.executable, "-c", _PRIVATE_UNPACK, str(folder), str(tmp), SENTENCE],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

        assert done.returncode == 0, done.stderr
        assert not left.exists(), "the killed process's folder outlived the next process"
        assert (kept / "sys.dic").is_file(), "a running process's folder was removed"
        assert sorted(path.name for path in tmp.iterdir()) == sorted([kept.name, unrelated.name])
    finally:
        for child in (killed, alive):
            child.kill()
            child.wait(timeout=30)


def test_folders_of_processes_that_are_gone_are_removed_and_of_running_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone_pid = int(gone.stdout)
    gone_here = f"lookout-ipadic-{gone_pid}-{THIS_HOST}-x1y2z3ab"
    running = f"lookout-ipadic-{os.getpid()}-{THIS_HOST}-ab12cd34"
    other_host = f"lookout-ipadic-{gone_pid}-another-host.local-q9w8e7r6"  # its pid means nothing here: kept
    for name in (gone_here, running, other_host, "lookout-ipadic-1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sys.dic").write_bytes(b"table")

    removed = terms.remove_orphan_dictionaries(tmp_path)

    assert [path.name for path in removed] == [gone_here]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([running, other_host, "lookout-ipadic-1"])
