"""The alert condition and the stories it is checked against, without a model: content words and outlet counts
read from the condition, new stories and grown ones (a delivered story that gained reports, which only a count of
outlets looks at, counting its earlier reports too), and what the words alone decide."""

from __future__ import annotations

import pytest
from pydantic_ai import models
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from research import ModelLimits, ModelSet
from research.alerts import ALERT_MAX_TOKENS, AlertStory, ask_alert_model, new_stories, parse_condition, words_check
from research.novelty import ItemStatus
from research.pipeline_models import ScoredItem
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import FakeOpenAI
from tests.research.fake_sources import BASE_TIME, make_item


@pytest.mark.parametrize(
    ("condition", "words", "outlets"),
    [
        ("when it releases a new model", ("releas", "model"), 1),
        ("3 or more outlets report a recall", ("recal",), 3),
        ("at least two sources say a recall of peanut butter", ("recal", "peanut", "butter"), 2),
        ("5+ sites mention an outage", ("outag",), 5),
        ("it happens", (), 1),
    ],
)
def test_a_condition_is_read_into_stemmed_content_words_and_a_least_number_of_outlets(
    condition: str, words: tuple[str, ...], outlets: int
) -> None:
    parsed = parse_condition(condition)
    assert (parsed.words, parsed.min_outlets) == (words, outlets)


def scored(
    key: str, cluster: str, status: ItemStatus, rank: int, *, title: str = "", site: str = "a.com"
) -> ScoredItem:
    item = make_item("news", key, title=title or f"Story {key}", url=f"https://{site}/{key}")
    return ScoredItem(
        item=item, cluster_id=cluster, relevance=0.5, credibility=None, score=0.5, rank=rank, status=status
    )


def test_new_stories_are_keyed_by_their_best_item_and_stories_delivered_before_are_grown() -> None:
    items = [
        scored("b", "c1", "new", 2),
        scored("a", "c1", "new", 1),
        scored("u", "c2", "update", 3),  # a development of a delivered story
        scored("r", "c3", "repeat", 4),
        scored("d", "c4", "delivered", 5),  # nothing gained in this run
        scored("e", "c3", "delivered", 6),  # collected again: an earlier report of c3
    ]
    earlier = make_item("news", "old", title="Story old", url="https://z.com/old")

    stories = new_stories(items, {"c2": (earlier,)})

    assert [(story.key, [item.id for item in story.items], story.grown) for story in stories] == [
        ("news:a", ["news:a", "news:b"], False),
        ("news:u", ["news:u"], True),
        ("news:r", ["news:r"], True),
    ]
    assert [[item.id for item in story.earlier] for story in stories] == [[], ["news:old"], ["news:e"]]


def recall(key: str, site: str) -> ScoredItem:
    return scored(key, "c1", "repeat", 1, title="Peanut butter recall widens", site=site)


def test_a_count_of_outlets_counts_a_grown_storys_earlier_reports_and_nothing_else_looks_at_it() -> None:
    """ "When 3 or more outlets report a recall": two outlets reported it yesterday (delivered then), a third today. A
    reader expects the alert now: the story's outlets are counted across runs, not within today's reports alone."""
    before = tuple(
        make_item("news", key, title="Peanut butter recall widens", url=f"https://{site}/{key}")
        for key, site in (("y1", "a.com"), ("y2", "b.com"))
    )
    [story] = new_stories([recall("t1", "c.com")], {"c1": before})
    count, words = parse_condition("3 or more outlets report a recall"), parse_condition("a peanut butter recall")

    assert story.grown and story.outlets == 3
    assert story.candidate(count) and words_check(count, story).fires
    assert {item.id for item in words_check(count, story).evidence} == {"news:t1", "news:y1", "news:y2"}
    # a condition with no count was told (or not) when the story was new: a later report does not fire it
    assert not story.candidate(words) and not words_check(words, story).fires
    # without the earlier reports, today's one outlet is not three
    [alone] = new_stories([recall("t1", "c.com")])
    assert alone.outlets == 1 and not words_check(count, alone).fires
    # stored for a pending check and read back, the story is the same
    assert story.stored() == {"key": "news:t1", "items": ["news:t1"], "earlier": ["news:y1", "news:y2"], "grown": True}


def test_the_words_alone_need_every_word_and_enough_outlets() -> None:
    release = parse_condition("it releases a new model")
    story = AlertStory(
        key="k",
        items=(make_item("news", "x", title="DeepSeek released its V4 model", url="https://a.com/x"),),
    )
    half = AlertStory(key="h", items=(make_item("news", "y", title="A model of the economy"),))

    assert story.share_of(release) == 1.0 and words_check(release, story).fires
    assert half.share_of(release) == 0.5 and half.candidate(release) and not words_check(release, half).fires
    assert not words_check(parse_condition("2 or more outlets report a model release"), story).fires


@pytest.mark.parametrize(
    ("answer", "fires"),
    [
        ('{"fires": true, "reason": "Out now.", "citations": [1]}', True),
        ("Sure! It fires.", False),
        ('{"fires": true, "reason": "<one sentence>", "citations": [1]}', False),
    ],
)
async def test_prompted_output_asks_in_one_system_message_and_garbage_does_not_fire(
    fake_server: FakeHTTPServer, answer: str, fires: bool
) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    fake.reply_text(answer)
    model = OpenAIChatModel(fake.model, provider=OpenAIProvider(base_url=fake.base_url, api_key=fake.api_key))
    light = ModelSet.of(model, None, limits=ModelLimits(output_mode="prompted")).light
    assert light is not None
    item = make_item("news", "x", title="DeepSeek releases its V4 model", url="https://a.com/x")
    story = AlertStory(key=item.id, items=(item,))

    with models.override_allow_model_requests(True):
        check = await ask_alert_model(
            light, topic="DeepSeek", condition=parse_condition("it releases a new model"), story=story, now=BASE_TIME
        )

    [request] = fake.requests  # one request, never retried
    assert request.roles == ["system", "user"]  # a chat template such as Gemma's allows one system message
    assert '{"fires": true or false' in request.system_messages[0] and request.max_tokens == ALERT_MAX_TOKENS
    assert check.fires is fires and check.evidence == ((item,) if fires else ())
