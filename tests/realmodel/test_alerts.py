"""An alert checked by a real model over local fake sources, from `lookout chat` as a person would: whatever the
model answers, at most one alert per story, every link in it one of the collected items, at most `MAX_QUESTIONS`
alert questions per run, each bounded — and the run's digest goes out as usual."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from app.wiring import server_profile
from research import MAX_QUESTIONS, ModelLimits, ModelSet
from research.alerts import ALERT_MAX_TOKENS, AlertStory, ask_alert_model, parse_condition
from sources import Item
from tests.app.test_chat_cli import route_sources, source_env
from tests.bots.slack_world import T0
from tests.fakes.http_server import FakeHTTPServer
from tests.realmodel.checks import request_problems
from tests.realmodel.proxy import ModelProxy
from tests.realmodel.test_digest import csv_urls
from tests.realmodel.world import EMPTY_REASON, chat, stored

_LINK = re.compile(r"\]\((\S+)\)")


def test_an_alert_through_a_real_model_fires_at_most_once_per_story_citing_collected_items(
    model_env: dict[str, str], proxy: ModelProxy, fake_server: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    route_sources(fake_server)
    data_dir = Path(model_env["DATA_DIR"])
    for key, value in source_env(fake_server, data_dir).items():
        monkeypatch.setenv(key, value)

    result = chat(["/track DeepSeek daily at 08:30 from hn,news", "/alert 1 when it releases a model", "/digest 1"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and not EMPTY_REASON.search(result.output), result.output

    questions = [
        exchange
        for exchange in proxy.chat_exchanges()
        if any("alert condition" in str(message.get("content")) for message in exchange.system_messages)
    ]
    assert len(questions) <= MAX_QUESTIONS
    problems = request_problems(questions)
    assert not problems, "; ".join(problems)

    with stored(data_dir) as connection:
        firings = connection.execute("SELECT alert_id, story_key, item_ids, run_id FROM alert_firings").fetchall()
        [(artifacts,)] = connection.execute("SELECT artifacts FROM runs WHERE monitor_id = 1").fetchall()
        notices = {
            run_id: json.loads(stats)["text"]
            for run_id, stats in connection.execute("SELECT id, stats FROM runs WHERE query LIKE 'alert #%'")
        }
    assert len({(alert, key) for alert, key, _, _ in firings}) == len(firings)
    assert len(notices) == len(firings)
    stories = [set(json.loads(items)) for _, _, items, _ in firings]
    assert all(not (a & b) for n, a in enumerate(stories) for b in stories[n + 1 :])  # no story told twice
    collected = csv_urls(Path(json.loads(artifacts)["csv"]))
    for text in notices.values():
        links = _LINK.findall(text)
        assert links and set(links) <= collected, text


async def test_one_alert_question_to_a_real_model_is_one_bounded_request_citing_only_the_storys_items(
    model_server: tuple[str, str], proxy: ModelProxy
) -> None:
    provider = OpenAIProvider(base_url=proxy.base_url, api_key="sk-local")
    model = OpenAIChatModel(model_server[1], provider=provider, profile=server_profile(self_hosted=True))
    # prompted: llama-cpp-python's server refuses a JSON-schema response format (README)
    limits = ModelLimits(output_mode="prompted", context_tokens=8192)
    light = ModelSet.of(model, None, limits=limits).light
    assert light is not None
    items = tuple(
        Item(id=f"news:{n}", source="news", url=f"https://{site}/v4", title=title, text=title, language="en")
        for n, (site, title) in enumerate(
            [("reuters.com", "DeepSeek releases V4 model with open weights"), ("ft.com", "DeepSeek ships V4 model")]
        )
    )
    story = AlertStory(key="news:0", items=items)

    check = await ask_alert_model(
        light, topic="DeepSeek", condition=parse_condition("it releases a new model"), story=story, now=T0
    )

    exchanges = proxy.chat_exchanges()
    assert len(exchanges) == 1 and exchanges[0].output_limit == ALERT_MAX_TOKENS
    assert not request_problems(exchanges), request_problems(exchanges)
    assert set(check.evidence) <= set(items)
    assert not check.fires or check.evidence  # what fires shows its evidence
