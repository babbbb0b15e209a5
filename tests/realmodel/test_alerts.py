"""An alert checked by a real model over local fake sources, from `lookout chat` as a person would: whatever the
model answers, at most one alert per story, every link in it one of the collected items, at most `MAX_QUESTIONS`
alert questions per run, each bounded — and the run's digest goes out as usual."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from research import MAX_QUESTIONS
from tests.app.test_chat_cli import route_sources, source_env
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
