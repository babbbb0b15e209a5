"""Rebuild `masakhanews_eng_categories.csv`, real BBC news in English with the category its editors filed it under,
for `bench/feedback_real.py` (a reader who wants some kinds of story and not others).

Columns: id, category, title, text, url, order. Every row of MasakhaNEWS English's own `dev.tsv` and `test.tsv`
(the `train.tsv` is not stored in the copies found); `text` is the start of the article, as much as Lookout reads
(`research.language.LEAD_CHARS`); `order` is the BBC's numeric article id at the end of its URL, which BBC News
hands out in publishing order (the set carries no dates), so a monitor's "days" follow it. See README.md here for
the source and licence.

Run: uv run python bench/data/build_feedback_sets.py <mirror root>
where <mirror root> holds bare clones named `<owner>+<name>/repo` (the search tool's `fetch` makes them):
  masakhane-io/masakhane-news       (MasakhaNEWS: BBC news in English, six categories)
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.data.build_sets import _git_show
from research.language import LEAD_CHARS

HERE = Path(__file__).parent
COLUMNS = ("id", "category", "title", "text", "url", "order")
_ARTICLE_ID = re.compile(r"(\d+)$")


def build_masakhanews_eng(mirror: Path) -> int:
    repo = mirror / "masakhane-io+masakhane-news" / "repo"
    csv.field_size_limit(1 << 30)
    rows: dict[str, dict[str, str]] = {}
    for file in ("dev.tsv", "test.tsv"):
        for row in csv.DictReader(io.StringIO(_git_show(repo, f"data/eng/{file}")), delimiter="\t"):
            found = _ARTICLE_ID.search(row["url"].strip())
            if found is None or found.group(1) in rows:
                continue
            rows[found.group(1)] = {
                "id": f"bbc-{found.group(1)}",
                "category": row["category"].strip(),
                "title": row["headline"].strip(),
                "text": " ".join(row["text"].split())[:LEAD_CHARS],
                "url": "https://www.bbc.co.uk" + row["url"].strip(),
                "order": found.group(1),
            }
    ordered = sorted(rows.values(), key=lambda row: int(row["order"]))
    with (HERE / "masakhanews_eng_categories.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(ordered)
    return len(ordered)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    count = build_masakhanews_eng(Path(sys.argv[1]))
    print(f"masakhanews_eng_categories.csv: {count} articles")


if __name__ == "__main__":
    main()
