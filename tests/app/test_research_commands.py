"""`lookout research` and `lookout collect` run the real sources against fake servers and show or write the results."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

PAYLOADS = Path(__file__).resolve().parents[1] / "sources" / "payloads"
runner = CliRunner()


@pytest.fixture
def sources_on_fakes(monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, tmp_path: Path) -> FakeHTTPServer:
    hn = (PAYLOADS / "hn_search_by_date.json").read_bytes()
    fake_server.route("GET", "/hn/search", FakeResponse(body=hn, content_type="application/json"))
    fake_server.route("GET", "/hn/search_by_date", FakeResponse(body=hn, content_type="application/json"))
    news = (PAYLOADS / "news_search.xml").read_bytes()
    fake_server.route("GET", "/news/search", FakeResponse(body=news, content_type="application/rss+xml"))
    # A client error is not retried, so the test does not wait on arXiv's 3 s spacing between retries.
    fake_server.route("GET", "/arxiv/query", FakeResponse(status=404, body="no such endpoint"))
    monkeypatch.setenv("HN_API_URL", f"{fake_server.url}/hn")
    monkeypatch.setenv("NEWS_RSS_URL", f"{fake_server.url}/news")
    monkeypatch.setenv("ARXIV_API_URL", f"{fake_server.url}/arxiv/query")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return fake_server


def test_research_prints_ranked_items_and_the_failing_source(sources_on_fakes: FakeHTTPServer) -> None:
    result = runner.invoke(cli, ["research", "DeepSeek", "--sources", "hn,news,arxiv", "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert "DeepSeek-V4: open weights, 1M context" in result.output
    assert "arxiv failed" in result.output
    hn_requests = sources_on_fakes.received("/hn/search")
    assert hn_requests and hn_requests[0].query["query"] == "DeepSeek"
    assert sources_on_fakes.received("/news/search")


def test_research_rejects_an_unknown_source_with_the_valid_names(sources_on_fakes: FakeHTTPServer) -> None:
    result = runner.invoke(cli, ["research", "DeepSeek", "--sources", "hn,myspace"])
    assert result.exit_code == 2
    assert "unknown source(s): myspace" in result.output
    assert "Valid:" in result.output
    assert sources_on_fakes.requests == []


def test_collect_without_a_model_writes_csv_and_json(sources_on_fakes: FakeHTTPServer, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["collect", "DeepSeek", "--target", "3", "--max-attempts", "2", "--sources", "hn,news"])
    assert result.exit_code == 0, result.output
    assert "No language model" in result.output
    csv_line = next(line for line in result.output.splitlines() if line.startswith("CSV:"))
    json_line = next(line for line in result.output.splitlines() if line.startswith("JSON:"))
    csv_path, json_path = Path(csv_line.split(maxsplit=1)[1]), Path(json_line.split(maxsplit=1)[1])
    assert csv_path.parent == json_path.parent == tmp_path / "data" / "exports" / "cli"  # the CLI's folder (#9.23)
    assert csv_path.stem.endswith("-collect")
    with csv_path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) >= 3
    assert {row["source"] for row in rows} == {"hn", "news"}
    metadata = json.loads(json_path.read_text(encoding="utf-8"))
    assert metadata["request"] == "DeepSeek"
    assert metadata["total_unique"] == len(rows)
    assert metadata["reached_target"] is True


def test_collect_exits_1_when_every_source_failed(sources_on_fakes: FakeHTTPServer) -> None:
    sources_on_fakes.route("GET", "/hn/search", FakeResponse(status=404, body="gone"))
    sources_on_fakes.route("GET", "/hn/search_by_date", FakeResponse(status=404, body="gone"))
    sources_on_fakes.route("GET", "/news/search", FakeResponse(status=404, body="gone"))

    result = runner.invoke(cli, ["collect", "DeepSeek", "--target", "3", "--max-attempts", "2", "--sources", "hn,news"])

    assert result.exit_code == 1, result.output
    assert "Every source failed, so nothing was collected for “DeepSeek”." in result.output
    assert "Failed: hn" in result.output
