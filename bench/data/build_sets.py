"""Rebuild the labelled real-news sets in this folder from the public repositories they come from.

Each set is one CSV with the same columns: id, story, outlet, title, text, url, published, language. `story` is
the label made by the set's authors (see README.md beside this file for sources and licences).

Run: uv run python bench/data/build_sets.py <mirror root>
where <mirror root> holds bare clones named `<owner>+<name>/repo` (the search tool's `fetch` makes them):
  pratikaher88/IPythonNotebooks   (the first 6,365 rows of the UCI News Aggregator file)
  cltl/ECB-parser                 (ECB+ corpus XML, 982 documents)
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent
COLUMNS = ("id", "story", "outlet", "title", "text", "url", "published", "language")
LEAD_SENTENCES = 2
"""Sentences of an ECB+ article kept after its headline: a lead, as a feed would carry it."""


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _git_files(repo: Path, prefix: str) -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in listing.splitlines() if line]


def _write(name: str, rows: list[dict[str, str]]) -> None:
    with (HERE / name).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{name}: {len(rows)} items, {len({r['story'] for r in rows})} stories")


def build_uci(mirror: Path) -> None:
    """UCI News Aggregator: headlines grouped by Google News story id (the STORY column)."""
    text = _git_show(mirror / "pratikaher88+IPythonNotebooks" / "repo", "uci-news-aggregator.csv")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("TIMESTAMP") or not row.get("TITLE"):
            continue  # the copy ends in a cut-off line
        published = datetime.fromtimestamp(int(row["TIMESTAMP"]) / 1000, tz=UTC)
        rows.append(
            {
                "id": f"uci-{row['ID']}",
                "story": row["STORY"],
                "outlet": row["PUBLISHER"],
                "title": row["TITLE"],
                "text": "",
                "url": row["URL"],
                "published": published.isoformat(timespec="seconds"),
                "language": "",
            }
        )
    _write("uci_news_aggregator.csv", rows)


_TOKEN = re.compile(r'<token t_id="\d+" sentence="(\d+)" number="\d+">(.*?)</token>')


def _detokenise(tokens: list[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r"(\d) ([.:,]) (\d)", r"\1\2\3", text)  # "4 . 6", "1 : 12", "52 , 000" were one token
    text = re.sub(r" ([,.;:!?%)\]}'])", r"\1", text)
    text = re.sub(r"([(\[{$]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    text = text.replace("`` ", '"').replace(" ''", '"').replace("&amp;", "&").replace("&quot;", '"')
    return " ".join(text.split())


def _sentences(xml: str) -> list[str]:
    by_sentence: OrderedDict[str, list[str]] = OrderedDict()
    for sentence, token in _TOKEN.findall(xml):
        by_sentence.setdefault(sentence, []).append(token)
    return [_detokenise(tokens) for tokens in by_sentence.values()]


_MONTHS = "january february march april may june july august september october november december"
_DATELINE_WORDS = frozenset(_MONTHS.split()) | {
    "published",
    "updated",
    "posted",
    "last",
    "am",
    "pm",
    "edt",
    "est",
    "pdt",
    "pst",
    "gmt",
    "bst",
    "utc",
    "by",
    "on",
    "at",
    "first",
}


def _is_dateline(sentence: str) -> bool:
    """A date, time or 'Published:' line that some pages put above or below the headline."""
    words = re.findall(r"[A-Za-z]{2,}", sentence)
    return len(words) <= 8 and all(word.lower().rstrip(".") in _DATELINE_WORDS or word.isupper() for word in words)


def build_ecbplus(mirror: Path) -> None:
    """ECB+: news articles on 43 topics, each topic with two look-alike seminal events (ECB and ECB+ halves).

    The story label is topic + half, as in the corpus' own subtopic split. ECB+ articles start with their URL
    and headline; the older ECB articles start with the lead, which then stands as the title.
    """
    repo = mirror / "cltl+ECB-parser" / "repo"
    rows = []
    for path in sorted(
        _git_files(repo, "ECB+/"), key=lambda p: [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", p)]
    ):
        name = path.rsplit("/", 1)[-1]
        match = re.fullmatch(r"(\d+)_(\d+)(ecb|ecbplus)\.xml", name)
        if not match:
            continue
        topic, number, half = match.groups()
        sentences = _sentences(_git_show(repo, path))
        url = ""
        if half == "ecbplus" and sentences and sentences[0].replace(" ", "").startswith("http"):
            url = sentences.pop(0).replace(" ", "")
        while sentences and _is_dateline(sentences[0]):
            sentences.pop(0)
        if not sentences:
            continue
        body = [sentence for sentence in sentences[1:] if not _is_dateline(sentence)]
        title, lead = sentences[0], " ".join(body[:LEAD_SENTENCES])
        rows.append(
            {
                "id": f"ecb-{topic}-{number}-{half}",
                "story": f"{topic}-{half}",
                "outlet": re.sub(r"^https?://(www\.)?", "", url).split("/")[0] if url else "ecb",
                "title": title,
                "text": lead,
                "url": url or f"https://ecb.example/{topic}/{number}",
                "published": "",
                "language": "en",
            }
        )
    _write("ecbplus.csv", rows)


def main() -> None:
    mirror = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror")
    build_uci(mirror)
    build_ecbplus(mirror)


if __name__ == "__main__":
    main()
