"""Novelty through `assess_novelty`: a delivered story is not news again because another outlet or another language
reports it; a development of it is (an update); a story not delivered before is new."""

from __future__ import annotations

import pytest

from research import novelty
from research.novelty import DEVELOPMENT_SHARE, assess_novelty
from sources.base import Item
from tests.research.fake_sources import make_item

TOPIC = "carmakers"
FILED = make_item(
    "news", "acme-files", title="Acme Motors files for bankruptcy protection", hours_ago=30,
    url="https://www.reuters.com/acme-files", text="The carmaker filed for Chapter 11 in Delaware on Monday.",
)  # fmt: skip
"""What yesterday's run delivered."""
COPY = make_item(
    "news", "acme-ap", title="Acme Motors files for bankruptcy", url="https://apnews.com/acme-bankruptcy",
    text="Acme Motors filed for bankruptcy protection on Monday.",
)  # fmt: skip
"""Another outlet's report of the same event, collected a day later."""
DECISION = make_item(
    "news", "acme-court", title="Court declares Acme Motors bankrupt, appoints liquidator",
    url="https://www.reuters.com/acme-court",
    text="A Delaware judge ordered the carmaker's assets sold; 4,200 workers lose their jobs.",
)  # fmt: skip
"""A later event of the same affair, from the outlet that carried the first report."""
KIMI = make_item("news", "kimi", title="Moonshot releases Kimi K2 weights", url="https://www.scmp.com/kimi-k2")


def statuses(items: list[Item], **delivered: object) -> dict[str, str]:
    result = assess_novelty(items, topic=TOPIC, **delivered)  # type: ignore[arg-type]
    assert result.cluster_of[COPY.id] == result.deduper.cluster_id(FILED.id), "the copy is in the delivered story"
    return dict(result.status)


def test_another_outlets_copy_of_a_delivered_story_is_a_repeat_and_its_development_an_update() -> None:
    found = statuses([COPY, DECISION, KIMI], delivered_items=[FILED], delivered_urls={FILED.url})

    assert found == {COPY.id: "repeat", DECISION.id: "update", KIMI.id: "new"}


def test_the_story_is_known_from_delivered_ids_alone_when_its_item_comes_back() -> None:
    # A seven-day look-back collects yesterday's delivered item again; only its id is remembered.
    found = statuses([FILED, COPY, DECISION], already_delivered={FILED.id})

    assert found == {FILED.id: "delivered", COPY.id: "repeat", DECISION.id: "update"}


def test_a_copy_in_another_language_is_a_repeat() -> None:
    # Embeddings put the Japanese report in the delivered English story; its words are all "new" to the English
    # ones, which says nothing: it is the same event.
    japanese = make_item(
        "news", "acme-ja", title="米アクメ・モーターズが破産法を申請", url="https://www.nikkei.com/acme", language="ja"
    )
    vectors = {FILED.id: [1.0, 0.0], japanese.id: [0.99, 0.05], KIMI.id: [0.0, 1.0]}
    result = assess_novelty([japanese, KIMI], delivered_items=[FILED], topic=TOPIC, vectors=vectors)

    assert result.cluster_of[japanese.id] == result.deduper.cluster_id(FILED.id)
    assert result.status == {japanese.id: "repeat", KIMI.id: "new"}


@pytest.mark.parametrize(("share", "copy", "decision"), [(0.0, "update", "update"), (1.01, "repeat", "repeat")])
def test_the_development_share_tells_an_update_from_a_repeat(
    monkeypatch: pytest.MonkeyPatch, share: float, copy: str, decision: str
) -> None:
    assert 0 < DEVELOPMENT_SHARE < 1  # between the two ends: the copy and the decision are told apart
    monkeypatch.setattr(novelty, "NEW_FIGURE_IS_DEVELOPMENT", False)
    monkeypatch.setattr(novelty, "DEVELOPMENT_SHARE", share)

    assert statuses([COPY, DECISION], delivered_items=[FILED]) == {COPY.id: copy, DECISION.id: decision}


@pytest.mark.parametrize("figures_count", [True, False])
def test_a_figure_the_delivered_story_did_not_quote_is_a_development(
    monkeypatch: pytest.MonkeyPatch, figures_count: bool
) -> None:
    # Mostly the delivered headline's words, plus a figure nobody quoted: a new toll is news.
    toll = make_item(
        "news", "acme-jobs", title="Acme Motors files for bankruptcy protection, 4,200 jobs at risk",
        url="https://apnews.com/acme-jobs",
    )  # fmt: skip
    monkeypatch.setattr(novelty, "NEW_FIGURE_IS_DEVELOPMENT", figures_count)
    found = statuses([COPY, toll], delivered_items=[FILED])

    assert found == {COPY.id: "repeat", toll.id: "update" if figures_count else "repeat"}
