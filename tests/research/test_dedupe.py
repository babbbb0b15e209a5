"""De-duplication: exact (id, URL) across calls, near-duplicate clustering, and its quality on labelled data."""

from __future__ import annotations

import random

from research.dedupe import Deduper, cluster_items, fingerprint, pair_scores, tokens
from sources.base import Engagement, Item
from tests.research.fake_sources import make_item
from tests.research.labelled_headlines import labelled_items

# Set a little under what the clustering achieves (file order 0.99 / 0.85; five shuffled orders 0.94 / 0.87
# on average), so a regression fails and an unlucky-but-fine change does not. See bench/README.md.
PRECISION_FLOOR = 0.95
RECALL_FLOOR = 0.83
SHUFFLED_PRECISION_FLOOR = 0.9
SHUFFLED_RECALL_FLOOR = 0.84


def test_labelled_set_is_big_and_mixed() -> None:
    items, labels = labelled_items()
    assert len(items) >= 120
    stories = set(labels)
    assert sum(labels.count(s) >= 3 for s in stories) >= 20, "many stories told by several outlets"
    assert {i.language for i in items} >= {"en", "zh", "ja", "de", "es", "fr", "ru", "ko"}


def test_clustering_precision_and_recall_on_labelled_headlines() -> None:
    items, labels = labelled_items()

    def score(order: list[int]) -> tuple[float, float]:
        deduper = Deduper()
        result = deduper.add(items[i] for i in order)
        assert len(result.new) == len(items)
        predicted = [deduper.cluster_id(item.id) or "" for item in items]
        scores = pair_scores(predicted, labels)
        return scores.precision, scores.recall

    precision, recall = score(list(range(len(items))))
    shuffled = []
    for seed in range(5):
        order = list(range(len(items)))
        random.Random(seed).shuffle(order)
        shuffled.append(score(order))
    mean_precision = sum(p for p, _ in shuffled) / len(shuffled)
    mean_recall = sum(r for _, r in shuffled) / len(shuffled)
    print(f"\nfile order: precision {precision:.3f} recall {recall:.3f}")
    print(f"5 shuffled orders (mean): precision {mean_precision:.3f} recall {mean_recall:.3f}")
    assert precision >= PRECISION_FLOOR
    assert recall >= RECALL_FLOOR
    assert mean_precision >= SHUFFLED_PRECISION_FLOOR
    assert mean_recall >= SHUFFLED_RECALL_FLOOR


def test_pair_scores_counts_pairs() -> None:
    scores = pair_scores(["a", "a", "b", "b"], ["x", "x", "x", "y"])
    # predicted pairs: (0,1), (2,3); true pairs: (0,1), (0,2), (1,2)
    assert (scores.predicted_pairs, scores.true_pairs, scores.correct_pairs) == (2, 3, 1)
    assert (scores.precision, round(scores.recall, 3)) == (0.5, 0.333)


def test_exact_duplicates_by_id_and_by_url_are_dropped_across_calls() -> None:
    deduper = Deduper()
    first = make_item("hn", "1", url="https://Example.com/a?utm_source=x#top")
    again_by_id = make_item("hn", "1", url="https://other.example/b")
    again_by_url = make_item("news", "zz", url="https://example.com/a/")
    fresh = make_item("news", "2", title="Something else entirely")

    one = deduper.add([first, first])
    assert [i.id for i in one.new] == ["hn:1"]
    assert [i.id for i in one.duplicates] == ["hn:1"], "a repeat inside one batch is a duplicate too"

    two = deduper.add([again_by_id, again_by_url, fresh])
    assert [i.id for i in two.new] == ["news:2"]
    assert [i.id for i in two.duplicates] == ["hn:1", "news:zz"]
    assert len(deduper) == 2
    assert deduper.seen(again_by_url)


def test_same_story_from_two_sources_is_one_cluster_with_both_urls_and_a_representative() -> None:
    reuters = Item(
        id="news:1",
        source="news",
        url="https://reuters.example/tesla-recall",
        title="Tesla recalls 239,000 vehicles over rearview camera failure",
        text="Tesla is recalling about 239,000 vehicles in the United States because a faulty circuit board "
        "can cause the rearview camera to fail.",
        engagement=Engagement(),
    )
    hn = Item(
        id="hn:2",
        source="hn",
        url="https://electrek.example/tesla-ota-recall",
        title="Tesla issues OTA recall for 239k cars after rearview camera glitch",
        text="A software update will fix the circuit board issue that can make rearview cameras go dark.",
        engagement=Engagement(points=120, comments=80),
    )
    ford = Item(
        id="news:3",
        source="news",
        url="https://reuters.example/ford-recall",
        title="Ford recalls 850,000 vehicles over fuel pump defect",
        text="Ford Motor is recalling about 850,000 vehicles in the United States because a fuel pump may "
        "fail and cause engine stalls.",
    )
    deduper = Deduper()
    first = deduper.add([reuters, ford])
    second = deduper.add([hn])
    assert first.new_clusters == 2
    assert second.new_clusters == 0, "the HN post joins the Reuters story"
    assert second.cluster_of["hn:2"] == first.cluster_of["news:1"] != first.cluster_of["news:3"]
    tesla = next(c for c in deduper.clusters if c.id == second.cluster_of["hn:2"])
    assert tesla.urls == ["https://reuters.example/tesla-recall", "https://electrek.example/tesla-ota-recall"]
    assert tesla.representative.id == "hn:2", "the most engaged member stands for the story"
    assert tesla.sources == ["news", "hn"]


def test_cjk_text_clusters_by_character_bigrams() -> None:
    a = make_item("rsshub", "a", title="华为Mate 80系列正式发布，搭载麒麟9030芯片", text="")
    b = make_item("rsshub", "b", title="华为Mate80发布 麒麟9030加持 售价4699元起", text="")
    c = make_item("rsshub", "c", title="小米YU7正式上市 售价25.35万元起", text="")
    clusters = cluster_items([a, b, c])
    assert sorted(len(cl.members) for cl in clusters) == [1, 2]
    assert "麒麟" in tokens("麒麟9030")


def test_tokens_and_fingerprint() -> None:
    assert tokens("Nvidia's revenue: $57bn, 9,000 jobs") == ["nvidia", "revenue", "57", "billion", "9.000", "jobs"]
    assert fingerprint("The Chips", "Chip maker").tokens == frozenset({"chip", "maker"})
    assert fingerprint("Tesla recalls 239,000 cars in 2026").figures == frozenset({"239.000"})
    assert fingerprint("Tesla recalls cars").subject == "tesla"
    assert fingerprint("华为Mate 80发布").subject is None
