"""The alert condition and the stories it is checked against, without a model: content words and outlet counts
read from the condition, only new stories kept (an update or repeat belongs to a delivered story), and what the
words alone decide."""

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


def test_only_stories_with_nothing_delivered_before_are_new_and_keyed_by_their_best_item() -> None:
    items = [
        scored("b", "c1", "new", 2),
        scored("a", "c1", "new", 1),
        scored("u", "c2", "update", 3),  # a development of a delivered story
        scored("r", "c3", "repeat", 4),
        scored("d", "c4", "delivered", 5),
    ]

    stories = new_stories(items)

    assert [(story.key, [item.id for item in story.items]) for story in stories] == [("news:a", ["news:a", "news:b"])]


def test_the_words_alone_need_every_word_and_enough_outlets() -> None:
    release = parse_condition("it releases a new model")
    story = AlertStory(
        key="k",
        items=(make_item("news", "x", title="DeepSeek released its V4 model", url="https://a.com/x"),),
        outlets=1,
    )
    half = AlertStory(key="h", items=(make_item("news", "y", title="A model of the economy"),), outlets=1)

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
    story = AlertStory(key=item.id, items=(item,), outlets=1)

    with models.override_allow_model_requests(True):
        check = await ask_alert_model(
            light, topic="DeepSeek", condition=parse_condition("it releases a new model"), story=story, now=BASE_TIME
        )

    [request] = fake.requests  # one request, never retried
    assert request.roles == ["system", "user"]  # a chat template such as Gemma's allows one system message
    assert '{"fires": true or false' in request.system_messages[0] and request.max_tokens == ALERT_MAX_TOKENS
    assert check.fires is fires and check.evidence == ((item,) if fires else ())
