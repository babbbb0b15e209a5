"""Rebuild `african_news.csv`, real news in African languages with the language each item is written in, for
`bench/language_detectors.py` (language detection, not story clustering: these sets carry topic labels only).

Columns: id, set, split, language, title, text, url. `split` is dev or test: the first DEV_ROWS rows of a set's own
dev file are `dev` (choose rules on them), the first TEST_ROWS rows of its test file are `test` (report only);
`text` is the start of the article, as much as Lookout reads (`research.language.LEAD_CHARS`). See README.md here
for sources and licences.

Run: uv run python bench/data/build_languages.py <mirror root>
where <mirror root> holds bare clones named `<owner>+<name>/repo` (the search tool's `fetch` makes them):
  masakhane-io/masakhane-news       (MasakhaNEWS: BBC, VOA and other outlets' news in 16 languages)
  dsfsi/za-isizulu-siswati-news-2022 (isiZulu headlines from Isolezwe)
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.data.build_sets import _git_show
from research.language import LEAD_CHARS

HERE = Path(__file__).parent
COLUMNS = ("id", "set", "split", "language", "title", "text", "url")
DEV_ROWS = 60
TEST_ROWS = 120
MASAKHANEWS = {
    "amh": "am", "eng": "en", "fra": "fr", "hau": "ha", "ibo": "ig", "lin": "ln", "lug": "lg", "orm": "om",
    "pcm": "pcm", "run": "rn", "sna": "sn", "som": "so", "swa": "sw", "tir": "ti", "xho": "xh", "yor": "yo",
}  # fmt: skip
"""MasakhaNEWS's folder (ISO 639-3) -> the code a detector answers (ISO 639-1 where the language has one)."""


def _masakhanews(mirror: Path) -> list[dict[str, str]]:
    repo = mirror / "masakhane-io+masakhane-news" / "repo"
    csv.field_size_limit(1 << 30)
    rows: list[dict[str, str]] = []
    for folder, language in MASAKHANEWS.items():
        for split, file, count in (("dev", "dev.tsv", DEV_ROWS), ("test", "test.tsv", TEST_ROWS)):
            found = list(csv.DictReader(io.StringIO(_git_show(repo, f"data/{folder}/{file}")), delimiter="\t"))
            for number, row in enumerate(found[:count]):
                rows.append(
                    {
                        "id": f"masakhanews-{folder}-{split}-{number}",
                        "set": f"masakhanews-{folder}",
                        "split": split,
                        "language": language,
                        "title": " ".join(row["headline"].split()),
                        "text": " ".join(row["text"].split())[:LEAD_CHARS],
                        "url": row["url"],
                    }
                )
    return rows


def _isizulu(mirror: Path) -> list[dict[str, str]]:
    repo = mirror / "dsfsi+za-isizulu-siswati-news-2022" / "repo"
    found = list(csv.DictReader(io.StringIO(_git_show(repo, "data/isizulu-titles-all-categories.csv"))))
    rows: list[dict[str, str]] = []
    for split, chosen in (("dev", found[:DEV_ROWS]), ("test", found[DEV_ROWS : DEV_ROWS + TEST_ROWS])):
        for number, row in enumerate(chosen):
            rows.append(
                {
                    "id": f"isizulu-{split}-{number}",
                    "set": "isizulu-titles",
                    "split": split,
                    "language": "zu",
                    "title": " ".join(row["title"].split()),
                    "text": "",
                    "url": row["url"],
                }
            )
    return rows


def main() -> None:
    mirror = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror")
    rows = _masakhanews(mirror) + _isizulu(mirror)
    with (HERE / "african_news.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"african_news.csv: {len(rows)} items")


if __name__ == "__main__":
    main()
