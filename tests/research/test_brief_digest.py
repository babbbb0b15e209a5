"""A small model's digest (LLM_CONTEXT_TOKENS ≤ 8192): a brief schema a server's grammar writes quickly — a headline
and a few developments, lengths and counts bounded in the schema, citations only to the items shown — a tight output
limit and a short prompt; the rest of the digest comes from code. A large model's digest keeps its full schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import models

from research import ModelLimits
from research.digest import (
    BRIEF_CITATIONS,
    BRIEF_DEVELOPMENTS,
    BRIEF_HEADLINE_CHARS,
    BRIEF_ITEMS,
    BRIEF_MAX_TOKENS,
    BRIEF_TEXT_CHARS,
    citations_in,
    llm_digest,
)
from research.rank import RankedItem, rank
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import FakeOpenAI, completion
from tests.research.fake_sources import BASE_TIME, make_item
from tests.research.test_critique import load_collection
from tests.research.test_real_model_guards import light_model

SMALL = ModelLimits(context_tokens=8192, output_mode="json_object")
EVENTS = ("releases weights", "cuts prices", "tops a leaderboard", "opens an office", "faces an outage", "hires")


def many_items(count: int = 12) -> list[RankedItem]:
    """`count` reports of distinct DeepSeek stories, more than a small model's digest shows."""
    items = [
        make_item("news", f"n{n}", title=f"DeepSeek {EVENTS[n % len(EVENTS)]} ({n})",
                  text=f"Reports say DeepSeek {EVENTS[n % len(EVENTS)]}; story number {n} of the day.", hours_ago=1 + n)
        for n in range(count)
    ]  # fmt: skip
    return rank(items, topic="DeepSeek", now=BASE_TIME)


def _long_answer(numbers: list[int]) -> dict[str, Any]:
    """What a server keeping no grammar may send: more developments and longer texts than the schema allows."""
    return {
        "headline": "DeepSeek " + "news " * 60,
        "developments": [{"text": f"Story {n}. " + "More words. " * 40, "citations": [n]} for n in numbers[:6]],
        "quality": {"completeness": 3, "quality": 1},  # not asked for: ignored
    }


async def test_a_small_model_is_asked_for_a_brief_digest_and_gets_the_rest_from_code(
    fake_server: FakeHTTPServer,
) -> None:
    ranked = many_items()
    assert len(ranked) > BRIEF_ITEMS
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    fake.reply_json(completion(content=json.dumps(_long_answer(list(range(1, BRIEF_ITEMS + 1)))), model=fake.model))

    with models.override_allow_model_requests(True):
        result = await llm_digest(ranked, topic="DeepSeek", model=light_model(fake, SMALL).light or "", now=BASE_TIME)

    (request,) = fake.requests
    assert request.max_tokens == BRIEF_MAX_TOKENS and request.roles.count("system") == 1
    assert f"these {BRIEF_ITEMS} items" in request.user_text
    schema = request.body["response_format"]["schema"]
    assert set(schema["properties"]) == {"headline", "developments"}, "no self-check or disputed claims to write"
    assert schema["properties"]["headline"]["maxLength"] == BRIEF_HEADLINE_CHARS
    developments = schema["properties"]["developments"]
    assert developments["maxItems"] == BRIEF_DEVELOPMENTS and developments["minItems"] == 1
    development = schema["$defs"]["Development"]["properties"]
    assert development["text"]["maxLength"] == BRIEF_TEXT_CHARS
    assert development["citations"]["maxItems"] == BRIEF_CITATIONS
    assert development["citations"]["items"]["enum"] == list(range(1, BRIEF_ITEMS + 1)), "only the items shown"

    digest = result.digest
    assert result.path == "model" and digest.without_model is None
    assert len(digest.developments) == BRIEF_DEVELOPMENTS, "more than asked for are cut, not sent back"
    assert all(len(d.text) <= BRIEF_TEXT_CHARS for d in digest.developments)
    assert len(digest.headline) <= BRIEF_HEADLINE_CHARS
    cited = {n for d in digest.developments for n in d.citations} | {n for c in digest.disputed for n in c.citations}
    cited |= {n for d in digest.developments for n in citations_in(d.text)}
    assert cited <= set(range(1, BRIEF_ITEMS + 1)) and {c.number for c in digest.cited} == cited
    assert digest.quality.completeness == BRIEF_DEVELOPMENTS / BRIEF_ITEMS, "the share of the stories shown it cites"
    assert "small language model" in digest.quality.notes


async def test_a_brief_citing_an_item_not_shown_is_sent_back_once_then_the_extractive_digest(
    fake_server: FakeHTTPServer,
) -> None:
    ranked = many_items()
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    wrong = {"headline": "DeepSeek", "developments": [{"text": "A story.", "citations": [BRIEF_ITEMS + 1]}]}
    for _ in range(3):
        fake.reply_json(completion(content=json.dumps(wrong), model=fake.model))

    with models.override_allow_model_requests(True):
        result = await llm_digest(ranked, topic="DeepSeek", model=light_model(fake, SMALL).light or "", now=BASE_TIME)

    assert len(fake.requests) == 2, "one request and one retry on a small model"
    assert f"[{BRIEF_ITEMS + 1}]" in fake.requests[1].body["messages"][-1]["content"]
    assert result.path == "extractive" and result.digest.without_model


async def test_a_large_model_still_writes_the_whole_digest(fake_server: FakeHTTPServer) -> None:
    collection = load_collection()
    fake = FakeOpenAI(fake_server, model="big")
    numbers = list(range(1, len(collection.ranked) + 1))
    answer = {
        "headline": "DeepSeek news [1]",
        "developments": [{"text": f"Development {n}.", "citations": [n]} for n in numbers[:3]],
        "changes_since_last": None,
        "disputed": [],
        "quality": {"completeness": 0.9, "quality": 0.8, "missing_angles": ["prices"]},
    }
    fake.reply_json(completion(content=json.dumps(answer), model=fake.model))
    large = ModelLimits(context_tokens=32_768, output_mode="json_object", synthesis_max_tokens=2048)

    with models.override_allow_model_requests(True):
        result = await llm_digest(
            collection.ranked, topic=collection.topic, model=light_model(fake, large).light or "",
            clusters=collection.clusters, now=collection.now,
        )  # fmt: skip

    (request,) = fake.requests
    assert request.max_tokens == 2048
    assert {"headline", "developments", "quality", "disputed"} <= set(
        request.body["response_format"]["schema"]["properties"]
    )
    assert result.path == "model" and result.digest.quality.missing_angles == ["prices"]
