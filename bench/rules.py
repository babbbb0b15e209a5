"""Benchmark rules per reader (issue #27): what one chat's rules cost per story at delivery, and what a hostile
pattern does.

A stored run is built in memory the way delivery sees it: 300 items in 60 stories (five reports each, titles and
~600-character descriptions in English and Chinese), and a digest of 7 developments citing 20 of them. For each set
of rules the whole per-chat decision is timed — grouping the digest's items into stories (`digest_stories`),
`apply_rules`, and `filter_digest` — and divided by the digest's stories (after one warm-up round). Patterns are
compiled once per process (cached: each pattern, and each kind's patterns as one RE2 set), so compiling is timed on
its own. The pathological cases: `(a+)+$` (exponential on a backtracking engine)
and a 280-character alternation run over stories of `MAX_MATCH_CHARS` characters of `a`; patterns RE2 refuses are
listed with the sentence the reader gets.

Target: ≤ 5 ms per story; a pathological pattern refused or bounded.

Run: uv run python bench/rules.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from research.digest import CitedItem, Development, Digest, QualityCheck
from research.rules import (
    MAX_MATCH_CHARS,
    MAX_RULES_PER_KIND,
    ReaderRules,
    RuleError,
    RunEntry,
    apply_rules,
    compile_pattern,
    digest_stories,
    filter_digest,
    pattern_set,
)
from sources import Item

TARGET_MS = 5.0
WORDS = ("model", "chips", "release", "open", "weights", "benchmark", "startup", "funding", "regulation", "lawsuit")
CHINESE = "华为发布新的中文大模型，性能超过此前版本，并开放权重供研究使用。"


def _run(*, stories: int = 60, reports: int = 5, text: str | None = None) -> tuple[Digest, list[RunEntry]]:
    entries = []
    for story in range(stories):
        for report in range(reports):
            words = " ".join(WORDS[(story + n) % len(WORDS)] for n in range(12))
            body = text if text is not None else (f"{words}. " * 6 + (CHINESE if story % 3 == 0 else ""))[:600]
            item = Item(
                id=f"news:{story}-{report}",
                source="news",
                url=f"https://site{report}.example{story % 7}.com/{story}/{report}",
                title=f"Story {story}: {words}",
                text=body,
            )
            entries.append(RunEntry(item=item, cluster_id=f"c{story}", relevance=(story % 10) / 10))
    cited = [entries[story * reports + report] for story in range(7) for report in range(3)][:20]
    numbered = {entry.item.id: number for number, entry in enumerate(cited, start=1)}
    developments = [
        Development(
            text=f"Development {story} [{numbered[cited[story * 3].item.id]}].",
            citations=[numbered[e.item.id] for e in cited if e.cluster_id == f"c{story}"],
        )
        for story in range(7)
    ]
    digest = Digest(
        headline="Story 0 — and 6 more stories",
        developments=developments,
        quality=QualityCheck(completeness=1, quality=0.8),
        cited=[CitedItem(number=numbered[e.item.id], title=e.item.title, url=e.item.url, source="news") for e in cited],
    )
    return digest, entries


def _alternation(chars: int) -> str:
    words = [f"w{n}ord" for n in range(200)]
    pattern = ""
    for word in words:
        if len(pattern) + len(word) + 1 > chars:
            break
        pattern = f"{pattern}|{word}" if pattern else word
    return pattern


CASES: list[tuple[str, ReaderRules | None, dict[str, object]]] = [
    ("no rules", ReaderRules(), {}),
    ("5 exclude words", ReaderRules(exclude=tuple(WORDS[:5])), {}),
    ("include 中文", ReaderRules(include=("中文",)), {}),
    (f"{MAX_RULES_PER_KIND} exclude words", ReaderRules(exclude=tuple(f"word{n}" for n in range(30))), {}),
    ("5 regexes", ReaderRules(regex=(r"\bmodel\b", r"open\s+weights", r"\d{4}", r"(?:chip|gpu)s?", r"华为|中文")), {}),
    (
        f"{MAX_RULES_PER_KIND} exclude regexes",
        ReaderRules(exclude_regex=tuple(rf"\bterm{n}\w*\b" for n in range(30))),
        {},
    ),
    ("block 3 outlets, max 3", ReaderRules(block=("example1.com", "example2.com", "site0.ex3.com"), max_stories=3), {}),
    (
        "every kind at its most",
        ReaderRules(
            include=(*(f"inc{n}" for n in range(29)), "model"),
            exclude=tuple(f"exc{n}" for n in range(30)),
            regex=(*(rf"\breg{n}\b" for n in range(29)), r"\bchips\b"),
            exclude_regex=tuple(rf"\bexr{n}\b" for n in range(30)),
            allow=tuple(f"example{n}.com" for n in range(7)),
            block=tuple(f"blocked{n}.org" for n in range(30)),
            max_stories=5,
            min_relevance=0.1,
        ),
        {},
    ),
    ("every kind at its most, 20,000-char stories", None, {"text": ("open weights model chips " * 1000)[:4000]}),
    ("(a+)+$ on 20,000 × a", ReaderRules(exclude_regex=(r"(a+)+$",)), {"text": "a" * MAX_MATCH_CHARS + "!"}),
    (
        "280-char alternation on 20,000 × a",
        ReaderRules(regex=(_alternation(280),)),
        {"text": "a" * MAX_MATCH_CHARS},
    ),
]

REFUSED = [
    ("back-reference", r"(a+)\1"),
    ("look-behind", r"(?<=GPT)-5"),
    ("over RE2's memory", r"\pL{500}"),
    ("nested repetition", r"((a{100}){100}){100}"),
    ("500-char alternation", _alternation(500)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    print("| rules | stories in the digest | compile (ms, once) | ms per story (median) | ms per story (worst) |")
    print("|---|---:|---:|---:|---:|")
    for name, given, run_options in CASES:
        rules = given if given is not None else CASES[7][1]  # the same rules as "every kind at its most"
        assert rules is not None
        digest, entries = _run(**run_options)  # type: ignore[arg-type]
        patterns = (*rules.regex, *rules.exclude_regex)
        compile_pattern.cache_clear()
        pattern_set.cache_clear()
        started = time.perf_counter()
        for pattern in patterns:
            compile_pattern(pattern)
        for kind in (rules.regex, rules.exclude_regex):
            if len(kind) > 1:
                pattern_set(kind)
        compiled_ms = (time.perf_counter() - started) * 1000
        apply_rules(digest_stories(digest, entries), rules)  # a warm-up round, not counted
        per_story = []
        stories = 0
        for _ in range(args.rounds):
            started = time.perf_counter()
            found = digest_stories(digest, entries)
            decision = apply_rules(found, rules)
            filter_digest(digest, decision.removed, decision.recounted)
            elapsed = (time.perf_counter() - started) * 1000
            stories = len(found)
            per_story.append(elapsed / max(stories, 1))
        print(f"| {name} | {stories} | {compiled_ms:.2f} | {statistics.median(per_story):.3f} | {max(per_story):.3f} |")
    print()
    print("| refused pattern | what the reader is told |")
    print("|---|---|")
    for name, pattern in REFUSED:
        try:
            ReaderRules().added("regex", [pattern])
        except RuleError as refusal:
            print(f"| {name} | {str(refusal)[:110]} |")
        else:
            print(f"| {name} | ACCEPTED (should be refused) |")
    print(f"\nTarget: ≤ {TARGET_MS} ms per story.")


if __name__ == "__main__":
    main()
