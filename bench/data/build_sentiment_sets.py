"""Rebuild the labelled sentiment sets in this folder (for `bench/sentiment_real.py`) from the public repositories
they come from.

Each set is one CSV with the columns text, label, language; `label` is the set's own (positive, negative or neutral),
never relabelled here. Texts are kept as the source has them; a text that occurs twice is kept once, or left out
when its two labels disagree. See README.md beside this file for sources and licences.

Run: uv run python bench/data/build_sentiment_sets.py <mirror root>
where <mirror root> holds bare clones named `<owner>+<name>/repo` (the search tool's `fetch` makes them):
  wychen-null/project_nlp_cuda   (Financial PhraseBank v1.0, `Sentences_AllAgree.txt`, with its licence file)
  fhamborg/NewsMTSC              (NewsMTSC, the "real-world" evaluation split `devtest_rw.jsonl`)
  sinjorjob/chABSA-dataset       (chABSA sentences with a polarity derived from their aspect annotations)
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

HERE = Path(__file__).parent
COLUMNS = ("text", "label", "language")


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _unique(rows: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    labels: dict[str, set[str]] = {}
    for text, label in rows:
        labels.setdefault(text, set()).add(label)
    return [(text, next(iter(found))) for text, found in labels.items() if len(found) == 1]


def _write(name: str, rows: list[tuple[str, str]], language: str) -> None:
    with (HERE / name).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows((text, label, language) for text, label in rows)
    print(f"{name}: {len(rows)} texts, {dict(Counter(label for _, label in rows))}")


def build_financial_phrasebank(mirror: Path) -> None:
    """Financial PhraseBank v1.0, the sentences all annotators agreed on: `sentence@label` per line."""
    text = _git_show(
        mirror / "wychen-null+project_nlp_cuda" / "repo", "data/FinancialPhraseBank-v1.0/Sentences_AllAgree.txt"
    )
    rows = []
    for line in text.splitlines():
        sentence, _, label = line.rpartition("@")
        if sentence.strip() and label in {"positive", "negative", "neutral"}:
            rows.append((sentence.strip(), label))
    _write("sentiment_fpb_en.csv", _unique(rows), "en")


def build_newsmtsc(mirror: Path) -> None:
    """NewsMTSC's real-world split: news sentences with the sentiment they express towards the person(s) they name
    (2 negative, 4 neutral, 6 positive); a sentence whose targets were given different labels is left out."""
    text = _git_show(
        mirror / "fhamborg+NewsMTSC" / "repo",
        "NewsSentiment/controller_data/datasets/NewsMTSC-dataset/devtest_rw.jsonl",
    )
    names = {2.0: "negative", 4.0: "neutral", 6.0: "positive"}
    rows = []
    for line in text.splitlines():
        record = json.loads(line)
        polarities = {target["polarity"] for target in record["targets"]}
        if len(polarities) == 1 and record["sentence_normalized"].strip():
            rows.append((record["sentence_normalized"].strip(), names[polarities.pop()]))
    _write("sentiment_newsmtsc_en.csv", _unique(rows), "en")


def build_chabsa(mirror: Path) -> None:
    """chABSA sentences as sinjorjob/chABSA-dataset derived them: 1 (positive) when the annotators marked more
    positive than negative aspects in the sentence, 0 (negative) when more negative; sentences with as many of each
    (or only neutral aspects) are not in the files."""
    repo = mirror / "sinjorjob+chABSA-dataset" / "repo"
    rows = []
    for name in ("data/train.tsv", "data/test.tsv"):
        for line in _git_show(repo, name).splitlines():
            sentence, label = line.split("\t")[:2]
            if sentence.strip() and label in {"0", "1"}:
                rows.append((sentence.strip(), "positive" if label == "1" else "negative"))
    _write("sentiment_chabsa_ja.csv", _unique(rows), "ja")


def main() -> None:
    mirror = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror")
    build_financial_phrasebank(mirror)
    build_newsmtsc(mirror)
    build_chabsa(mirror)


if __name__ == "__main__":
    main()
