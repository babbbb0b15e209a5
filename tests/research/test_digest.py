"""The digest step: citations checked in code (a bad `[n]` makes the model try again), the extractive digest,
the fallback to it, rendering, and one run through the real Gemini client against the fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelRequest, RetryPromptPart, ToolReturnPart
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from research.critique import heuristic_critique
from research.dedupe import Cluster
from research.digest import (
    CitedItem,
    Development,
    Digest,
    DisputedClaim,
    PreviousDigest,
    QualityCheck,
    citations_in,
    extractive_digest,
    llm_digest,
    render_digest_markdown,
)
from research.rank import rank
from sources.base import Item
from tests.fakes.gemini import FakeGemini
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import ScriptedModel
from tests.research.test_critique import ARXIV_ID, RUMOUR_ID, Collection, load_collection

REUTERS_ID = "news:url:3f1c2a9b8e7d6c5b4a392817"
VERGE_ID = "news:url:9a8b7c6d5e4f3a2b1c0d9e8f"
QUALITY = {"completeness": 0.8, "quality": 0.7, "missing_angles": ["independent benchmarks"]}


def draft(*developments: tuple[str, list[int]], headline: str = "DeepSeek releases V4", **extra: Any) -> dict[str, Any]:
    """A model answer in the `DigestDraft` shape."""
    answer: dict[str, Any] = {
        "headline": headline,
        "developments": [{"text": text, "citations": cited} for text, cited in developments],
        "changes_since_last": None,
        "disputed": [],
        "quality": QUALITY,
    }
    answer.update(extra)
    return answer


GOOD = draft(
    ("DeepSeek released V4 with open weights and a technical report.", [1, 2]),
    ("API prices were cut, by 50% or 75% depending on the report.", [3]),
    ("A viral post claims V4 was trained on smuggled H100s; nothing corroborates it.", [4]),
)


@pytest.fixture
def collection() -> Collection:
    return load_collection()


@pytest.fixture
def top5(collection: Collection) -> Collection:
    """The top-K list the model sees, K = 5."""
    return Collection(
        topic=collection.topic, now=collection.now, ranked=collection.ranked[:5], clusters=collection.clusters
    )


def retry_messages(script: ScriptedModel, call: int) -> list[str]:
    """What the model was told to fix before request `call` (on the output-tool path, a retried tool return)."""
    messages = script.requests[call]
    found = []
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if isinstance(part, RetryPromptPart):
                found.append(part.model_response())
            elif isinstance(part, ToolReturnPart) and part.outcome == "retried":
                found.append(str(part.content))
    return found


async def test_a_citation_of_a_missing_item_makes_the_model_try_again(top5: Collection) -> None:
    bad = draft(
        ("DeepSeek released V4 with open weights.", [1, 9]),
        ("API prices were cut.", [3]),
        ("A viral post claims smuggled H100s.", [4]),
    )
    script = ScriptedModel(bad, GOOD, repeat_last=True)

    result = await llm_digest(top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, now=top5.now)

    assert script.calls == 2
    assert retry_messages(script, 0) == []
    (retry,) = retry_messages(script, 1)
    assert "[9]" in retry and "numbered 1 to 5" in retry
    assert result.path == "model" and result.fallback_reason is None
    assert result.usage.requests == 2
    digest = result.digest
    assert [d.citations for d in digest.developments] == [[1, 2], [3], [4]]
    assert [c.number for c in digest.cited] == [1, 2, 3, 4]
    by_number = {i: entry.item for i, entry in enumerate(top5.ranked, 1)}
    assert [(c.title, c.url, c.source) for c in digest.cited] == [
        (by_number[n].title, by_number[n].url, by_number[n].source) for n in (1, 2, 3, 4)
    ]


async def test_inline_citations_are_checked_and_kept(top5: Collection) -> None:
    inline_bad = draft(*[(d["text"], d["citations"]) for d in GOOD["developments"]], headline="V4 is out [6]")
    inline_good = draft(
        ("DeepSeek released V4 [5], with open weights.", [1]),
        *[(d["text"], d["citations"]) for d in GOOD["developments"][1:]],
        disputed=[{"claim": "Trained on smuggled H100s [4]", "status": "unverified", "citations": []}],
    )
    script = ScriptedModel(inline_bad, inline_good, repeat_last=True)

    result = await llm_digest(top5.ranked, topic=top5.topic, model=script.model, now=top5.now)

    (retry,) = retry_messages(script, 1)
    assert "[6]" in retry
    assert result.path == "model"
    assert result.digest.developments[0].citations == [1, 5], "inline citations join the list"
    assert [c.number for c in result.digest.cited] == [1, 3, 4, 5]


async def test_chat_template_markup_in_a_draft_makes_the_model_try_again(top5: Collection) -> None:
    past_its_turn = draft(
        ("DeepSeek released V4 with open weights.<end_of_turn>\n<start_of_turn>user", [1, 2]),
        *[(d["text"], d["citations"]) for d in GOOD["developments"][1:]],
    )
    script = ScriptedModel(past_its_turn, GOOD, repeat_last=True)
    result = await llm_digest(top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, now=top5.now)
    (retry,) = retry_messages(script, 1)
    assert "“<end_of_turn>”" in retry
    assert result.path == "model"
    assert "<end_of_turn>" not in result.digest.model_dump_json()


async def test_too_few_developments_makes_the_model_try_again(top5: Collection) -> None:
    script = ScriptedModel(draft(("Only one thing happened.", [1])), GOOD, repeat_last=True)
    result = await llm_digest(top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, now=top5.now)
    (retry,) = retry_messages(script, 1)
    assert "at least 3 key developments" in retry
    assert result.path == "model" and len(result.digest.developments) == 3


async def test_persistent_bad_citations_fall_back_to_the_extractive_digest(top5: Collection) -> None:
    script = ScriptedModel(draft(("x", [9]), ("y", [9]), ("z", [9])), repeat_last=True)
    result = await llm_digest(top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, now=top5.now)

    assert result.path == "extractive"
    assert result.fallback_reason is not None and result.fallback_reason.startswith("UnexpectedModelBehavior")
    assert result.usage.requests == script.calls >= 2
    expected = extractive_digest(top5.ranked, topic=top5.topic, clusters=top5.clusters, now=top5.now)
    assert result.digest == expected.model_copy(
        update={"without_model": "Summarised without the language model, which failed (unusable answer)."}
    )


async def test_an_api_error_falls_back_to_the_extractive_digest(top5: Collection) -> None:
    critique = heuristic_critique(top5.ranked, clusters=top5.clusters, now=top5.now)
    script = ScriptedModel(
        ModelHTTPError(429, "scripted", body={"error": {"status": "RESOURCE_EXHAUSTED"}}), repeat_last=True
    )

    result = await llm_digest(
        top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, critique=critique, now=top5.now
    )

    assert result.path == "extractive"
    assert result.fallback_reason is not None and "429" in result.fallback_reason
    expected = extractive_digest(top5.ranked, topic=top5.topic, clusters=top5.clusters, critique=critique, now=top5.now)
    assert result.digest.model_copy(update={"without_model": None}) == expected
    # The reader is told, in the digest itself, that no model wrote it and why.
    rendered = render_digest_markdown(result.digest)
    assert "_Summarised without the language model, which failed (rate limit, HTTP 429)._" in rendered
    assert rendered.index("Summarised without") < rendered.index("1. ")


def test_an_empty_digest_has_no_quality_score_and_names_failed_sources() -> None:
    empty = Digest(
        headline="Nothing new about DeepSeek",
        developments=[],
        quality=QualityCheck(completeness=1.0, quality=0.0, notes="12 items collected; all were delivered before."),
        failed_sources=["rss example.org/feed.xml: HTTP 500", "hn: cannot connect"],
    )

    rendered = render_digest_markdown(empty)

    assert "Self-check" not in rendered and "quality" not in rendered and "%" not in rendered
    assert "_12 items collected; all were delivered before._" in rendered
    assert "**Sources that failed:**\n- rss example.org/feed.xml: HTTP 500\n- hn: cannot connect" in rendered


async def test_no_items_means_no_model_call() -> None:
    script = ScriptedModel(RuntimeError("must not be called"), repeat_last=True)
    result = await llm_digest([], topic="DeepSeek", model=script.model)
    assert script.calls == 0 and result.path == "extractive"
    assert result.digest.headline == "Nothing new about DeepSeek" and result.digest.developments == []


def test_extractive_digest_shape(collection: Collection) -> None:
    critique = heuristic_critique(collection.ranked, clusters=collection.clusters, now=collection.now)
    digest = extractive_digest(
        collection.ranked, topic=collection.topic, clusters=collection.clusters, critique=critique,
        now=collection.now,
    )  # fmt: skip

    number = collection.number
    release = sorted(number(i) for i in (ARXIV_ID, REUTERS_ID, VERGE_ID, "hn:42871234"))
    assert len(digest.developments) == 4, "one development per story"
    assert release in [d.citations for d in digest.developments], "a story cites every item that told it"
    first = digest.developments[0]
    best = critique.ranked()[0]
    assert best.number in first.citations, "stories come in the critique's order"
    assert digest.headline.endswith("— and 3 more stories")
    assert [c.number for c in digest.cited] == list(range(1, len(collection.ranked) + 1))
    assert all(c.url.startswith("https://") for c in digest.cited)
    disputed = {(d.status, tuple(d.citations)) for d in digest.disputed}
    assert ("disputed", tuple(sorted([number(REUTERS_ID), number(VERGE_ID)]))) in disputed
    assert ("unverified", (number(RUMOUR_ID),)) in disputed, "a lone social post is flagged"
    assert digest.quality.completeness == 1.0 and 0 < digest.quality.quality <= 1
    assert digest.quality.missing_angles == []
    assert "no model" in digest.quality.notes
    assert digest.changes_since_last is None
    assert Digest.model_validate_json(digest.model_dump_json()) == digest


async def test_a_critique_of_another_list_is_not_applied(collection: Collection) -> None:
    critique = heuristic_critique(collection.ranked, clusters=collection.clusters, now=collection.now)
    shifted = collection.ranked[1:]
    digest = extractive_digest(shifted, topic=collection.topic, clusters=collection.clusters, critique=critique,
                               now=collection.now)  # fmt: skip
    assert digest == extractive_digest(
        shifted, topic=collection.topic, clusters=collection.clusters, now=collection.now
    )

    script = ScriptedModel(GOOD, repeat_last=True)
    await llm_digest(shifted, topic=collection.topic, model=script.model, critique=critique, now=collection.now)
    assert "assessment:" not in script.user_prompt() and "contradiction between" not in script.user_prompt()


def test_extractive_digest_caps_developments_and_reports_what_it_left_out(collection: Collection) -> None:
    items = [
        Item(id=f"hn:{i}", source="hn", url=f"https://news.ycombinator.com/item?id={i}", title=f"Topic {i} story",
             published=collection.now)
        for i in range(10)
    ]  # fmt: skip
    ranked = rank(items, topic="story", now=collection.now)
    digest = extractive_digest(ranked, topic="story", now=collection.now)

    assert len(digest.developments) == 7
    assert digest.quality.completeness == 0.7
    assert "every item comes from one source (hn)" in digest.quality.missing_angles
    assert any("no primary source" in angle for angle in digest.quality.missing_angles)


def test_extractive_digest_says_what_changed_since_the_last_one(collection: Collection) -> None:
    first_items = [entry for entry in collection.ranked if entry.item.id != "reddit:1gx7k2p"]
    first = extractive_digest(first_items, topic=collection.topic, clusters=collection.clusters, now=collection.now)
    previous = PreviousDigest.of(first)

    second = extractive_digest(
        collection.ranked, topic=collection.topic, clusters=collection.clusters, previous=previous,
        now=collection.now,
    )  # fmt: skip
    again = extractive_digest(
        first_items, topic=collection.topic, clusters=collection.clusters, previous=previous, now=collection.now
    )

    assert second.changes_since_last == "1 new story since the last digest; 3 continue from it."
    assert again.changes_since_last == "Nothing new since the last digest: the same stories continue."


async def test_the_previous_digest_and_the_critique_reach_the_model_as_data(collection: Collection) -> None:
    critique = heuristic_critique(collection.ranked, clusters=collection.clusters, now=collection.now)
    assert critique.contradictions, "the payload has two reports of one story with different figures"
    previous = PreviousDigest(headline="DeepSeek teases V4", developments=["A V4 launch date leaked [2]"])
    script = ScriptedModel(GOOD, repeat_last=True)

    await llm_digest(
        collection.ranked, topic=collection.topic, model=script.model, clusters=collection.clusters,
        critique=critique, previous=previous, profile="investor", now=collection.now,
    )  # fmt: skip

    prompt = script.user_prompt()
    frame = prompt[prompt.index("<previous_digest>") : prompt.index("</previous_digest>")]
    assert "headline: DeepSeek teases V4" in frame and "- A V4 launch date leaked [2]" in frame
    items = prompt[prompt.index("<untrusted_items>") : prompt.index("</untrusted_items>")]
    assert items.count("    assessment: relevance") == len(collection.ranked)
    numbers = critique.contradictions[0].numbers
    assert f"contradiction between [{numbers[0]}], [{numbers[1]}]: the reports give different figures" in items
    info = script.infos[0]
    assert "synthesis step" in (info.instructions or "") and "Reader profile: investor" in (info.instructions or "")


def test_citations_in_text() -> None:
    assert citations_in("V4 is out [1], prices cut [2, 3][4] and [x] or [ 5 ]") == [1, 2, 3, 4]


def test_markdown_rendering() -> None:
    digest = Digest(
        headline="DeepSeek releases V4",
        developments=[
            Development(text="Open weights are out [2].", citations=[1, 2]),
            Development(text="Prices cut.", citations=[3]),
        ],
        changes_since_last="V4 launched; last time it was a rumour.",
        disputed=[DisputedClaim(claim="Trained on H100s", status="unverified", citations=[3])],
        quality=QualityCheck(completeness=0.8, quality=0.75, missing_angles=["benchmarks"]),
        cited=[
            CitedItem(number=1, title="DeepSeek-V4 [paper]", url="https://arxiv.org/abs/2611.04512", source="arxiv"),
            CitedItem(number=2, title="Weights", url="https://example.com/a_(b) c", source="hn"),
            CitedItem(number=3, title="Post", url="https://x.com/a/status/1", source="x"),
        ],
    )
    assert render_digest_markdown(digest) == (
        "**DeepSeek releases V4**\n\n"
        "1. Open weights are out [2]. [1]\n"
        "2. Prices cut. [3]\n\n"
        "**Since the last digest:** V4 launched; last time it was a rumour.\n\n"
        "**Disputed or unverified:**\n"
        "- Trained on H100s [3] (unverified)\n\n"
        "_Self-check: completeness 80%, quality 75%; missing: benchmarks_\n\n"
        "**Sources**\n"
        "[1] [DeepSeek-V4 (paper)](https://arxiv.org/abs/2611.04512) — arxiv\n"
        "[2] [Weights](https://example.com/a_%28b%29%20c) — hn\n"
        "[3] [Post](https://x.com/a/status/1) — x\n"
    )


async def test_digest_through_the_gemini_client(fake_server: FakeHTTPServer, top5: Collection) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_function_call("final_result", GOOD)
    model = GoogleModel(gemini.model, provider=GoogleProvider(api_key=gemini.api_key, base_url=gemini.url))
    critique = heuristic_critique(top5.ranked, clusters=top5.clusters, now=top5.now)

    with models.override_allow_model_requests(True):
        result = await llm_digest(
            top5.ranked, topic=top5.topic, model=model, clusters=top5.clusters, critique=critique, now=top5.now
        )

    assert result.path == "model", result.fallback_reason
    assert result.digest.headline == "DeepSeek releases V4"
    assert [d.citations for d in result.digest.developments] == [[1, 2], [3], [4]]
    assert result.digest.quality == QualityCheck.model_validate(QUALITY)
    assert (result.usage.model, result.usage.requests, result.usage.input_tokens) == ("google:gemini-test", 1, 100)
    (request,) = gemini.requests
    assert "synthesis step of a news-monitoring service" in request.system_text
    assert "Topic: DeepSeek V4" in request.system_text
    assert request.function_names == ["final_result"]
    schema = json.dumps(request.function_declarations[0])
    assert all(name in schema for name in ("headline", "developments", "citations", "disputed", "quality"))
    assert "<untrusted_items>" in request.user_text and "There is no previous digest." in request.user_text
    for number, entry in enumerate(top5.ranked, 1):
        assert f"[{number}] {entry.item.title}" in request.user_text
    assert "[6]" not in request.user_text, "only the top-K items are sent"


def test_a_cluster_without_known_members_still_counts_its_item(collection: Collection) -> None:
    orphan = Cluster(id="other", members=[collection.ranked[0].item])
    digest = extractive_digest(collection.ranked[:1], topic=collection.topic, clusters=[orphan], now=collection.now)
    assert len(digest.developments) == 1 and digest.developments[0].citations == [1]


async def test_a_failing_gemini_gives_a_digest_that_says_it_was_written_without_it(
    fake_server: FakeHTTPServer, top5: Collection
) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
    model = GoogleModel(gemini.model, provider=GoogleProvider(api_key=gemini.api_key, base_url=gemini.url))
    unreachable = GoogleModel("gemini-test", provider=GoogleProvider(api_key="k", base_url="http://127.0.0.1:9"))

    with models.override_allow_model_requests(True):
        overloaded = await llm_digest(top5.ranked, topic=top5.topic, model=model, clusters=top5.clusters, now=top5.now)
        offline = await llm_digest(
            top5.ranked, topic=top5.topic, model=unreachable, clusters=top5.clusters, now=top5.now
        )

    assert overloaded.path == offline.path == "extractive"
    assert overloaded.digest.without_model == (
        "Summarised without the language model, which failed (server error, HTTP 503)."
    )
    assert offline.digest.without_model == "Summarised without the language model, which failed (connection error)."


async def test_a_digest_in_another_language_than_asked_falls_back_to_the_extractive_digest(top5: Collection) -> None:
    script = ScriptedModel(GOOD)
    result = await llm_digest(
        top5.ranked, topic=top5.topic, model=script.model, clusters=top5.clusters, language="de", now=top5.now
    )

    assert result.path == "extractive" and result.fallback_reason == "wrong language: en where de was asked"
    assert script.calls == 1 and result.usage.requests == 1, "what the model spent still counts"
    expected = extractive_digest(top5.ranked, topic=top5.topic, clusters=top5.clusters, now=top5.now)
    note = "Summarised without the language model, which wrote in another language (en, not de)."
    assert result.digest == expected.model_copy(update={"without_model": note})


async def test_a_digest_in_the_asked_language_is_kept_with_its_english_names(top5: Collection) -> None:
    german = draft(
        ("DeepSeek hat V4 mit offenen Gewichten und einem technischen Bericht veröffentlicht.", [1, 2]),
        ("Die API-Preise wurden gesenkt, je nach Bericht um 50 % oder 75 %.", [3]),
        ('Ein viraler Beitrag ("Trained on smuggled H100s") behauptet Schmuggel; nichts bestätigt ihn.', [4]),
        headline="DeepSeek veröffentlicht V4",
    )
    result = await llm_digest(
        top5.ranked, topic=top5.topic, model=ScriptedModel(german).model, language="de", now=top5.now
    )
    assert result.path == "model" and result.digest.headline == "DeepSeek veröffentlicht V4"
