"""Tone per item and story: from the critique's structured output when a model runs, from VADER for English without
one, "unknown" elsewhere; a sentiment column in the CSV, a tone-shift note in the digest, a chart split by tone."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo

from research.chart import SENTIMENT_COLOURS, volume_counts, write_volume_chart
from research.digest import Digest, QualityCheck
from research.pipeline import run_pipeline
from research.sentiment import Sentiment, lexicon_sentiment, mean_sentiment, tone_shift
from tests.kit import ScriptedModel
from tests.research.fake_sources import make_item
from tests.research.test_pipeline import (
    BASE_TIME,
    ITEM_LINE,
    TOPIC,
    RecordingSource,
    prompt_of,
    read_csv,
    request_for,
)

GOOD = make_item(
    "news", "good", title="DeepSeek R1 wins praise as a brilliant, record-breaking open model", hours_ago=2
)
BAD = make_item("news", "bad", title="DeepSeek R1 outage angers users as attacks cripple the service", hours_ago=3)
CHINESE = make_item("rsshub", "zh", title="深度求索R1模型发布", hours_ago=4, language="zh")


def source() -> RecordingSource:
    return RecordingSource("news", lambda query: [GOOD, BAD, CHINESE] if query.text == TOPIC else [])


def test_the_lexicon_scores_english_and_leaves_other_languages_unknown() -> None:
    good = lexicon_sentiment(GOOD.title, "en")
    bad = lexicon_sentiment(BAD.title, "en")
    assert good is not None and good.label == "positive" and good.score > 0.3
    assert bad is not None and bad.label == "negative" and bad.score < -0.3
    assert lexicon_sentiment(CHINESE.title, "zh") is None


def test_story_tone_and_a_clear_shift() -> None:
    positive = Sentiment(score=0.6, label="positive")
    negative = Sentiment(score=-0.5, label="negative")
    assert mean_sentiment([positive, None, positive]) == Sentiment(score=0.6, label="positive")
    mixed = mean_sentiment([positive, negative])
    assert mixed is not None and mixed.label == "mixed"
    assert tone_shift(positive, negative) == "The tone turned negative (it was positive in the previous digest)."
    assert tone_shift(positive, Sentiment(score=0.5, label="positive")) is None
    assert tone_shift(None, negative) is None


async def test_the_csv_has_a_sentiment_column_without_a_model(tmp_path: Path) -> None:
    result = await run_pipeline(
        request_for([source()]), light_model=None, heavy_model=None, out_dir=tmp_path, stem="lex",
        now=lambda: BASE_TIME,
    )  # fmt: skip
    rows = {row["url"]: row for row in read_csv(result.exports.csv)}
    assert rows[GOOD.url]["sentiment"] == "positive" and float(rows[GOOD.url]["sentiment_score"]) > 0
    assert rows[BAD.url]["sentiment"] == "negative" and float(rows[BAD.url]["sentiment_score"]) < 0
    assert rows[CHINESE.url]["sentiment"] == "unknown" and rows[CHINESE.url]["sentiment_score"] == ""


def critique_with_tone(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    tool = info.output_tools[0]
    prompt = prompt_of(messages)
    numbers = [int(n) for n, _ in ITEM_LINE.findall(prompt)]
    answer: dict[str, Any]
    if "assessments" in tool.parameters_json_schema.get("properties", {}):
        answer = {
            "assessments": [
                {
                    "number": n,
                    "relevance": 0.9,
                    "credibility": 0.8,
                    "reason": "ok",
                    "sentiment": -0.7,
                    "tone": "negative",
                }
                for n in numbers
            ]
        }
    else:
        answer = {
            "headline": f"DeepSeek R1 in trouble [{numbers[0]}]",
            "developments": [{"text": "Development.", "citations": [numbers[0]]}],
            "quality": {"completeness": 0.8, "quality": 0.7},
        }
    return ModelResponse(parts=[ToolCallPart(tool.name, answer)])


async def test_the_critique_gives_the_tone_the_csv_shows_it_and_the_digest_names_a_shift(tmp_path: Path) -> None:
    previous = Digest(
        headline="Praise for DeepSeek R1",
        developments=[],
        quality=QualityCheck(completeness=1, quality=1),
        tone=Sentiment(score=0.6, label="positive"),
    )
    result = await run_pipeline(
        request_for([source()], previous_digest=previous),
        light_model=None,
        heavy_model=ScriptedModel(critique_with_tone, name="heavy", repeat_last=True).model,
        out_dir=tmp_path,
        stem="model",
        now=lambda: BASE_TIME,
    )
    rows = read_csv(result.exports.csv)
    assert {row["sentiment"] for row in rows} == {"negative"}, "the model's tone, the Chinese item's too"
    assert {row["sentiment_score"] for row in rows} == {"-0.7000"}
    assert result.digest.tone is not None and result.digest.tone.label == "negative"
    assert result.digest.changes_since_last is not None
    assert "turned negative (it was positive" in result.digest.changes_since_last


def test_the_chart_splits_volume_by_tone(tmp_path: Path) -> None:
    items = [GOOD, BAD, CHINESE]
    tones = {GOOD.id: "positive", BAD.id: "negative", CHINESE.id: "unknown"}
    since, until = BASE_TIME - timedelta(days=1), BASE_TIME
    counts = volume_counts(items, since=since, until=until, series=tones)
    assert {name: sum(c) for name, c in counts.per_source.items()} == {"positive": 1, "negative": 1, "unknown": 1}
    path = write_volume_chart(items, path=tmp_path / "tone.png", title=TOPIC, since=since, until=until, series=tones)
    assert path.stat().st_size > 1000
    assert set(tones.values()) <= set(SENTIMENT_COLOURS)
