"""The reader's rules as pure functions: patterns RE2 accepts or refuses (and why), word matching across scripts,
the decision per story with the rule that dropped it, and the digest a reader gets after it."""

from __future__ import annotations

import pytest

from research.digest import CitedItem, Development, Digest, DisputedClaim, QualityCheck, render_digest_markdown
from research.rules import (
    MAX_PATTERN_CHARS,
    ReaderRules,
    RuleError,
    RunEntry,
    apply_rules,
    compile_pattern,
    digest_stories,
    filter_digest,
    word_pattern,
)
from sources import Item


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a+)\1", "invalid escape sequence: \\1"),  # a back-reference: RE2 has none
        (r"(?<=GPT)-5", "invalid perl operator: (?<"),  # a look-behind
        (r"(?!x)y", "invalid perl operator: (?!"),
        (r"\pL{500}", "pattern too large"),  # over REGEX_MAX_MEM
        (r"((a{100}){100}){100}", "invalid repetition size"),
        ("(unclosed", "missing )"),
        ("  ", "An empty pattern matches everything"),
        ("a|" * 150 + "b", f"at most {MAX_PATTERN_CHARS} are allowed"),  # a huge alternation
    ],
)
def test_a_pattern_re2_refuses_is_refused_in_one_sentence(pattern: str, reason: str) -> None:
    with pytest.raises(RuleError) as refused:
        ReaderRules().added("regex", [pattern])
    assert reason in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_catastrophic_backtracking_pattern_is_linear_on_re2() -> None:
    rules = ReaderRules(exclude_regex=(r"(a+)+$",))  # exponential on a backtracking engine
    compiled = compile_pattern(rules.exclude_regex[0])
    assert compiled.search("a" * 100_000 + "!") is None
    assert compiled.search("xx aaaa") is not None


def test_words_match_whole_words_in_spaced_scripts_and_substrings_in_cjk() -> None:
    assert word_pattern("AI").search("new ai chips") and not word_pattern("AI").search("she said so")
    assert word_pattern("中文").search("这是中文文本")  # no spaces around a Chinese word
    assert word_pattern("GPT-5").search("openai ships gpt-5 today")
    assert word_pattern("Ärzte").search("die ärzte streiken")  # case-folded beyond ASCII


def _item(key: str, title: str, url: str, text: str = "", source: str = "news") -> Item:
    return Item(id=f"{source}:{key}", source=source, url=url, title=title, text=text)


def _digest() -> tuple[Digest, list[RunEntry]]:
    entries = [
        RunEntry(item=_item("a1", "Nvidia unveils AI chips", "https://chips.example.org/a1"), cluster_id="a",
                 relevance=0.9),
        RunEntry(item=_item("a2", "Nvidia's new chips, in detail", "https://gossip.example.net/a2"), cluster_id="a",
                 relevance=0.5),
        RunEntry(item=_item("b1", "Celebrity chef opens restaurant", "https://gossip.example.net/b1",
                            text="A famous chef."), cluster_id="b", relevance=0.2),
        RunEntry(item=_item("c1", "华为发布新的中文大模型", "https://tech.example.cn/c1"), relevance=0.7),
        RunEntry(item=_item("d1", "An uncited report on chips", "https://other.example.com/d1"), cluster_id="a"),
    ]  # fmt: skip
    digest = Digest(
        headline="Nvidia unveils AI chips — and 2 more stories",
        developments=[
            Development(text="Nvidia unveils AI chips [1], with details [2].", citations=[1, 2]),
            Development(text="A celebrity chef opens a restaurant [3].", citations=[3]),
            Development(text="Huawei releases a Chinese model.", citations=[4]),
        ],
        changes_since_last="3 new stories since the last digest; 0 continue from it.",
        disputed=[DisputedClaim(claim="The chef's claim [3]", status="unverified", citations=[3])],
        quality=QualityCheck(completeness=1, quality=0.7),
        cited=[
            CitedItem(number=1, title="Nvidia unveils AI chips", url="https://chips.example.org/a1", source="news"),
            CitedItem(number=2, title="Nvidia's new chips, in detail", url="https://gossip.example.net/a2",
                      source="news"),
            CitedItem(number=3, title="Celebrity chef opens restaurant", url="https://gossip.example.net/b1",
                      source="news"),
            CitedItem(number=4, title="华为发布新的中文大模型", url="https://tech.example.cn/c1", source="news"),
        ],
    )  # fmt: skip
    return digest, entries


def test_stories_follow_the_runs_clusters_and_keep_uncited_reports_for_matching() -> None:
    digest, entries = _digest()
    stories = digest_stories(digest, entries)
    assert [(s.key, s.numbers) for s in stories] == [("a", (1, 2)), ("b", (3,)), ("news:c1", (4,))]
    assert "an uncited report on chips" in stories[0].text and stories[0].relevance == 0.9
    # a cited item the run no longer holds is a story of its own, judged by its title and site
    gone = digest_stories(digest, entries[:2])
    assert [(s.key, s.numbers) for s in gone] == [("a", (1, 2)), ("cited:3", (3,)), ("cited:4", (4,))]


@pytest.mark.parametrize(
    ("rules", "dropped", "removed"),
    [
        (ReaderRules(exclude=("celebrity",)), {3: 'exclude "celebrity"'}, [3]),
        (ReaderRules(include=("chips", "中文")), {3: "include chips, 中文"}, [3]),
        (ReaderRules(regex=(r"\bAI\b",)), {3: r"include /\bAI\b/", 4: r"include /\bAI\b/"}, [3, 4]),
        (
            ReaderRules(exclude_regex=(r"华为|chef",)),
            {3: "exclude-regex /华为|chef/", 4: "exclude-regex /华为|chef/"},
            [3, 4],
        ),
        # a blocked outlet's reports go; a story with nothing else is left out, one with other outlets stays
        (ReaderRules(block=("example.net",)), {3: "block example.net"}, [2, 3]),
        (ReaderRules(allow=("example.org", "example.cn")), {3: "allow example.org, example.cn"}, [2, 3]),
        (ReaderRules(min_relevance=0.6), {3: "min-relevance 0.6 (it scored 0.20)"}, [3]),
        (ReaderRules(max_stories=1), {3: "max 1", 4: "max 1"}, [3, 4]),
        (ReaderRules(exclude=("chef",), max_stories=1), {3: 'exclude "chef"', 4: "max 1"}, [3, 4]),
    ],
)
def test_each_rule_names_itself_on_what_it_dropped(
    rules: ReaderRules, dropped: dict[int, str], removed: list[int]
) -> None:
    digest, entries = _digest()
    decision = apply_rules(digest_stories(digest, entries), rules)
    assert {left.numbers[0]: left.rule for left in decision.dropped} == dropped
    assert decision.removed == removed


def test_the_filtered_digest_loses_dropped_stories_their_markers_and_sources() -> None:
    digest, entries = _digest()
    decision = apply_rules(digest_stories(digest, entries), ReaderRules(block=("example.net",)))

    filtered = filter_digest(digest, decision.removed)

    assert [d.text for d in filtered.developments] == [
        "Nvidia unveils AI chips [1], with details.",
        "Huawei releases a Chinese model.",
    ]
    assert [d.citations for d in filtered.developments] == [[1], [4]]
    assert filtered.disputed == []
    assert [c.number for c in filtered.cited] == [1, 4]
    assert filtered.headline == "Nvidia unveils AI chips — and 1 more story"
    assert filtered.changes_since_last is None  # it counted the story left out
    assert filter_digest(digest, [2]).changes_since_last == digest.changes_since_last  # every story still told
    rendered = render_digest_markdown(filtered)
    assert "gossip.example.net" not in rendered and "chef" not in rendered


def test_when_the_lead_story_goes_the_next_one_heads_the_digest() -> None:
    digest, _entries = _digest()
    assert filter_digest(digest, [1, 2]).headline == "A celebrity chef opens a restaurant."
    assert filter_digest(digest, [1, 2, 3, 4]).headline == "Nothing in this digest passed your filter"
    assert filter_digest(digest, []) is digest


def test_rules_are_stored_compactly_and_changed_by_kind() -> None:
    rules = ReaderRules().added("include", ["AI", " chips "]).added("block", ["https://www.Example.com/path"])
    rules = rules.added("max", ["5"]).added("min-relevance", ["0.4"]).added("regex", [r"\bGPT-?5\b"])

    assert rules.stored() == {
        "include": ["AI", "chips"], "regex": [r"\bGPT-?5\b"], "block": ["example.com"], "max_stories": 5,
        "min_relevance": 0.4,
    }  # fmt: skip
    assert ReaderRules.from_stored(rules.stored()) == rules
    assert ReaderRules.from_stored({"regex": [r"(a)\1"]}) is None  # unreadable rules are skipped, never fatal
    assert rules.summary() == r"include AI, chips · regex /\bGPT-?5\b/ · block example.com · max 5 · min-relevance 0.4"
    assert rules.removed("include", ["ai"]).include == ("chips",)
    assert rules.removed("max").max_stories is None and rules.added("max", ["off"]).max_stories is None
    assert rules.removed("regex").regex == ()
    for kind, value, reason in (
        ("max", "0", "max takes a whole number from 1 to 50"),
        ("max", "many", "max takes a whole number from 1 to 50"),
        ("min-relevance", "2", "min-relevance takes a number from 0 to 1"),
        ("block", "///", "is no outlet"),
        ("include", "x" * 101, "is over 100 characters"),
    ):
        with pytest.raises(RuleError, match=reason):
            rules.added(kind, [value])  # type: ignore[arg-type]


def test_several_patterns_of_a_kind_match_in_one_pass_and_name_the_one_that_hit() -> None:
    digest, entries = _digest()
    rules = ReaderRules(exclude_regex=(r"\bnothing\b", r"(?:chef|cook)s?", r"中文"))

    decision = apply_rules(digest_stories(digest, entries), rules)

    assert {left.numbers[0]: left.rule for left in decision.dropped} == {
        3: "exclude-regex /(?:chef|cook)s?/",
        4: "exclude-regex /中文/",
    }


def test_a_story_the_run_did_not_score_is_kept_by_a_minimum_relevance() -> None:
    digest, entries = _digest()
    unscored = [entry for entry in entries if entry.item.id != "news:b1"]  # the chef story is no longer in the run

    decision = apply_rules(digest_stories(digest, unscored), ReaderRules(min_relevance=0.8))

    assert [(left.numbers, left.rule) for left in decision.dropped] == [([4], "min-relevance 0.8 (it scored 0.70)")]


def test_a_kept_storys_count_of_outlets_and_reports_is_the_readers_own_after_its_outlet_rules() -> None:
    """The extractive digest says "(reported by 3 outlets; +3 more reports)" for the whole run; a reader blocking one
    outlet reads the story counted without it, and a reader without rules reads the run's count."""
    from research.dedupe import Cluster
    from research.digest import extractive_digest
    from research.rank import RankedItem

    title = "Chip export rules tighten for advanced accelerators"
    items = [
        _item(f"c{n}", title, f"https://{site}/chips-{n}")
        for n, site in enumerate(["reuters.com", "ft.com", "tabloid.example", "tabloid.example"])
    ]
    ranked = [
        RankedItem(item=item, cluster_id="c1", relevance=0.9, recency=1.0, engagement=0.5, score=1.0 - n / 10)
        for n, item in enumerate(items[:2])
    ]  # the digest cites two; the other two are reports of the same story it counts
    digest = extractive_digest(ranked, topic="chips", clusters=[Cluster(id="c1", members=items)])
    entries = [RunEntry(item=item, cluster_id="c1", relevance=0.9) for item in items]
    [development] = digest.developments
    assert development.text.endswith("(reported by 3 outlets; +3 more reports)")

    blocked = apply_rules(digest_stories(digest, entries), ReaderRules(block=("tabloid.example",)))
    [told] = filter_digest(digest, blocked.removed, blocked.recounted).developments
    assert told.text.endswith("(reported by 2 outlets; +1 more report)") and told.citations == development.citations

    reuters_only = apply_rules(digest_stories(digest, entries), ReaderRules(allow=("reuters.com",)))
    [alone] = filter_digest(digest, reuters_only.removed, reuters_only.recounted).developments
    assert alone.text.endswith("(reuters.com)") and alone.citations == [1]

    unruled = apply_rules(digest_stories(digest, entries), ReaderRules(exclude=("celebrity",)))
    assert unruled.recounted == [] and filter_digest(digest, unruled.removed, unruled.recounted) == digest
