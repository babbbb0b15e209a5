"""The no-model digest's stories: led by the report most outlets carry (never a discussion post when a report
exists), one or two sentences quoted from the items' own descriptions in the story's language, "+N more reports",
the run CSV's story columns, and two events about one subject kept apart (real headlines)."""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from pathlib import Path

from research.dedupe import Cluster, Deduper, is_discussion, story_lead, story_leads
from research.digest import clean_description, extractive_digest, story_summary
from research.export import RUN_CSV_COLUMNS, write_run_csv
from research.pipeline_models import ScoredItem
from research.rank import RankWeights, rank, select_top
from sources.base import Engagement, Item

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)

ASK_HN = Item(
    id="hn:1",
    source="hn",
    url="https://news.ycombinator.com/item?id=1",
    title="Ask HN: Is Zephyr-7 actually better than Llama at code?",
    text="I've tried it for a week on our monorepo and I'm not sure the benchmarks tell the whole story.",
    author="throwaway42",
    published=NOW - timedelta(hours=1),
    engagement=Engagement(points=950, comments=610),
)
REUTERS = Item(
    id="news:reuters",
    source="news",
    url="https://www.reuters.com/technology/zephyr-labs-releases-zephyr-7",
    title="Zephyr Labs releases open-weight Zephyr-7 model for code",
    text=(
        "<p>Zephyr Labs released Zephyr-7 on Tuesday, an open-weight model it says beats Llama on coding "
        "benchmarks.</p><p>The weights are free for commercial use &amp; research.</p>"
        "<p>Continue reading on reuters.com</p>"
    ),
    author="Reuters",
    published=NOW - timedelta(hours=3),
)
VERGE = Item(
    id="news:verge",
    source="news",
    url="https://www.theverge.com/2026/11/20/zephyr-7",
    title="Zephyr Labs' Zephyr-7 open-weight model targets code",
    text="Zephyr Labs' Zephyr-7 open-weight model targets code  The Verge",  # Google News: the title again
    author="The Verge",
    published=NOW - timedelta(hours=2),
)
TECHCRUNCH = Item(
    id="news:techcrunch",
    source="news",
    url="https://techcrunch.com/2026/11/20/zephyr-labs-zephyr-7",
    title="Zephyr Labs releases Zephyr-7, an open-weight model for code",
    text="The startup says the 7-billion-parameter model runs on a single consumer GPU. It was trained in six weeks.",
    published=NOW - timedelta(hours=2),
)
NIKKEI_JA = Item(
    id="news:nikkei",
    source="news",
    url="https://www.nikkei.com/article/zephyr7",
    title="ゼファー・ラボ、コード向け公開モデル「Zephyr-7」を発表",
    text="米新興のゼファー・ラボは20日、プログラミング向けの公開モデル「Zephyr-7」を発表した。商用利用も無料とした。",
    language="ja",
    published=NOW - timedelta(hours=2),
)
OUTAGE = Item(
    id="news:outage",
    source="news",
    url="https://www.theregister.com/2026/11/20/zephyr_api_outage",
    title="Zephyr Labs API down for three hours",
    text="Developers reported failed requests across the region.",
    published=NOW - timedelta(hours=5),
)
RELEASE = [ASK_HN, REUTERS, VERGE, TECHCRUNCH]
BY_ENGAGEMENT = RankWeights(relevance=0.1, recency=0.1, engagement=1.0)
"""A ranking where the most discussed item comes first, as a popular Ask HN thread often does."""


def release_run(*extra: Item) -> tuple[list[Item], dict[str, str], list[Cluster]]:
    items = [*RELEASE, OUTAGE, *extra]
    cluster_of = {item.id: "c1" for item in [*RELEASE, *extra]} | {OUTAGE.id: "c2"}
    clusters = [
        Cluster(id="c1", members=[item for item in items if cluster_of[item.id] == "c1"]),
        Cluster(id="c2", members=[OUTAGE]),
    ]
    return items, cluster_of, clusters


def test_discussion_posts_are_told_from_reports() -> None:
    assert is_discussion(ASK_HN)
    for title in ("Show HN: A Zephyr-7 playground", "Tell HN: Zephyr-7 deleted my branch", "Re: Zephyr-7 is out"):
        assert is_discussion(REUTERS.model_copy(update={"title": title}))
    reddit = REUTERS.model_copy(update={"source": "reddit", "url": "https://www.reddit.com/r/LocalLLaMA/x"})
    assert is_discussion(reddit)
    assert is_discussion(REUTERS.model_copy(update={"title": "Is Zephyr-7 the best open model yet?"}))
    assert not any(is_discussion(item) for item in (REUTERS, VERGE, TECHCRUNCH, NIKKEI_JA, OUTAGE))


def test_a_discussion_post_never_leads_a_story_that_has_a_report() -> None:
    items, cluster_of, clusters = release_run()
    assert story_lead(RELEASE).id != ASK_HN.id
    assert story_lead(list(reversed(RELEASE))) == story_lead(RELEASE), "the same lead in any order"
    assert story_lead([ASK_HN]) == ASK_HN, "a story of one discussion post is still shown"
    # Threads that copy the story's own words (a Reddit post titled with the headline) still never lead it.
    reddit = REUTERS.model_copy(
        update={"id": "reddit:1", "source": "reddit", "url": "https://www.reddit.com/r/LocalLLaMA/comments/1/z7",
                "author": "u/someone", "text": ""}
    )  # fmt: skip
    comment = ASK_HN.model_copy(  # what sources.hn makes of a comment: "Re: " and its story's title
        update={"id": "hn:2", "url": "https://news.ycombinator.com/item?id=2", "title": f"Re: {REUTERS.title}"}
    )
    assert story_lead([reddit, VERGE, TECHCRUNCH]).id in {VERGE.id, TECHCRUNCH.id}
    assert story_lead([comment, REUTERS, VERGE, TECHCRUNCH]).id != comment.id
    # A question made of exactly the Reuters report's words, and the most engaged item: still a report leads.
    question = ASK_HN.model_copy(update={"title": f"{REUTERS.title}?"})
    assert story_lead([question, REUTERS, VERGE, TECHCRUNCH]).id != question.id

    ranked = rank(items, topic="Zephyr-7", cluster_of=cluster_of, now=NOW, weights=BY_ENGAGEMENT)
    assert ranked[0].item.id == ASK_HN.id, "the post ranks first (most engaged): the case that matters"
    leads = story_leads(items, cluster_of)
    # One slot per story: the story's lead takes it, not the best-ranked post.
    top = select_top(ranked, top_k=5, per_story=1, leads={k: v.item_id for k, v in leads.items()})
    assert [entry.item.id for entry in top] == [leads["c1"].item_id, OUTAGE.id]

    for digest in (
        extractive_digest(ranked, topic="Zephyr-7", clusters=clusters, now=NOW),
        extractive_digest(ranked, topic="Zephyr-7", clusters=clusters, now=NOW, leads=leads),
        extractive_digest(top, topic="Zephyr-7", clusters=clusters, now=NOW, leads=leads),
    ):
        first = digest.developments[0].text
        assert not first.startswith("Ask HN"), first
        assert first.startswith(("Zephyr Labs releases", "Zephyr Labs' Zephyr-7")), first
        assert not digest.headline.startswith("Ask HN")


def test_the_summary_is_quoted_from_the_items_descriptions_cleaned() -> None:
    items, cluster_of, clusters = release_run()
    ranked = rank(items, topic="Zephyr-7", cluster_of=cluster_of, now=NOW, weights=BY_ENGAGEMENT)
    digest = extractive_digest(ranked, topic="Zephyr-7", clusters=clusters, now=NOW)

    first = digest.developments[0].text
    title, _, rest = first.partition(" — ")
    summary = rest.rsplit(" (", 1)[0]
    assert summary, first
    descriptions = [clean_description(item.text) for item in RELEASE if not is_discussion(item)]
    sentences = [s for s in summary.replace(". ", ".\n").splitlines() if s]
    assert 1 <= len(sentences) <= 2
    assert all(any(sentence in d for d in descriptions) for sentence in sentences), "word for word from a description"
    assert "<p>" not in first and "&amp;" not in first and "Continue reading" not in first
    assert "not sure the benchmarks" not in first, "never quoted from the discussion post"
    assert not summary.startswith(title), "a description that repeats the title is not quoted"

    assert clean_description(REUTERS.text) == (
        "Zephyr Labs released Zephyr-7 on Tuesday, an open-weight model it says beats Llama on coding benchmarks. "
        "The weights are free for commercial use & research."
    )
    assert story_summary(VERGE.title, [VERGE.text]) == "", "a title echo is no summary"
    footnoted = "Zephyr-7 was trained on public code only.[2] Its licence allows commercial use.[3]"
    assert story_summary("Zephyr-7", [footnoted]) == (
        "Zephyr-7 was trained on public code only. Its licence allows commercial use."
    ), "a footnote mark would read as a citation"
    wire = "WASHINGTON (Reuters) - Zephyr Labs was sued on Friday over its training data. "
    wire += "The suit seeks damages from the startup."
    assert story_summary("Zephyr Labs sued", [wire]) == (
        "Zephyr Labs was sued on Friday over its training data. The suit seeks damages from the startup."
    ), "no dateline"
    cut = "Zephyr Labs has chosen its developer week to announce the model. It may lack the context window of its"
    assert story_summary("Zephyr-7", [cut]) == "Zephyr Labs has chosen its developer week to announce the model."
    assert story_summary("Zephyr-7", [cut.split(".")[1]]) == "It may lack the context window of its…"
    long = "A first sentence that goes on. " * 30
    assert len(story_summary("Title", [long])) <= 320


def test_the_summary_is_in_the_story_language() -> None:
    asahi = NIKKEI_JA.model_copy(
        update={"id": "news:asahi", "url": "https://www.asahi.com/z7", "text": "", "title": "「Zephyr-7」発表"}
    )
    japanese = [NIKKEI_JA, asahi]
    cluster = Cluster(id="c9", members=[*japanese, TECHCRUNCH])
    ranked = rank([*japanese, TECHCRUNCH], topic="Zephyr-7", cluster_of={i.id: "c9" for i in cluster.members}, now=NOW)
    ranked = [entry for entry in ranked if entry.item.language == "ja"] + [
        entry for entry in ranked if entry.item.language != "ja"
    ]
    digest = extractive_digest(ranked, topic="Zephyr-7", clusters=[cluster], now=NOW)
    text = digest.developments[0].text
    assert "米新興のゼファー・ラボは20日" in text, text
    assert "consumer GPU" not in text, "an English description is not quoted under a Japanese lead"


def test_more_reports_are_counted_in_the_digest_and_listed_in_the_csv(tmp_path: Path) -> None:
    items, cluster_of, clusters = release_run()
    ranked = rank(items, topic="Zephyr-7", cluster_of=cluster_of, now=NOW, weights=BY_ENGAGEMENT)
    leads = story_leads(items, cluster_of)
    assert leads["c1"].reports == 4 and leads["c2"].reports == 1
    # What was delivered before never leads the next digest, but still counts among the story's reports.
    fresh = story_leads(items, cluster_of, eligible={VERGE.id, ASK_HN.id, OUTAGE.id})
    assert fresh["c1"].item_id == VERGE.id and fresh["c1"].reports == 4
    top = select_top(ranked, top_k=5, per_story=2, leads={k: v.item_id for k, v in leads.items()})
    digest = extractive_digest(top, topic="Zephyr-7", clusters=clusters, now=NOW, leads=leads)
    release, outage = digest.developments
    assert "+3 more reports" in release.text, "counted over the whole story, not only the items cited"
    assert len(release.citations) == 2
    assert "more report" not in outage.text
    assert "+1 more report)" in extractive_digest(
        top[:1], topic="Zephyr-7", now=NOW, clusters=[Cluster(id="c1", members=[REUTERS, VERGE])]
    ).developments[0].text.replace("; +1 more report)", "+1 more report)")

    scored = [
        ScoredItem(item=entry.item, cluster_id=entry.cluster_id, relevance=entry.relevance, credibility=None,
                   score=entry.score, rank=position)
        for position, entry in enumerate(ranked, start=1)
    ]  # fmt: skip
    path = tmp_path / "run.csv"
    write_run_csv(path, scored)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == RUN_CSV_COLUMNS
    by_id = {row["url"]: row for row in rows}
    lead_row = next(row for row in rows if row["story_role"] == "lead" and row["cluster_id"] == "c1")
    lead_url = next(item.url for item in items if item.id == leads["c1"].item_id)
    assert lead_row["url"] != ASK_HN.url and lead_row["url"] == lead_url
    release_rows = [row for row in rows if row["cluster_id"] == "c1"]
    assert sorted(row["story_role"] for row in release_rows) == ["lead", "more", "more", "more"]
    assert {row["story_lead"] for row in release_rows} == {lead_row["index"]}
    assert {row["story_reports"] for row in release_rows} == {"4"}
    assert by_id[OUTAGE.url]["story_role"] == "lead" and by_id[OUTAGE.url]["story_reports"] == "1"


# Real headlines and leads (ECB+ corpus, topic 40: Cybulska & Vossen, LREC 2014, CC BY 3.0; see bench/data/README.md;
# the leads cut at 160 characters, as a feed's description would be): two look-alike events about one subject,
# Apple's laptop launches at Macworld 2009 and at WWDC 2012, each told by four outlets. A monitor on "Apple" sees
# both in one batch. (With the titles alone the two are merged through "MacBook Pro": bench/README.md,
# cluster_subjects.py.)
LAUNCHES = {
    "macworld-2009": [
        (
            "After weeks of speculation about what would be introduced at Macworld, Apple Inc. took the wraps off of "
            "updated iTunes and iLife software and unveiled a 17-inch MacBook Pro on Tuesday.",
            "The Cupertino, Calif.-based company (NASDAQ: AAPL) said iTunes songs will now have three-tiered pricing: "
            "69 cents, 99 cents and $1.29, depending on how new or d",
        ),
        (
            "Apple on Tuesday launched a refresh of the 17-inch MacBook Pro, giving the company's largest laptop an "
            "eight-hour battery life, a faster Intel (NSDQ: INTC) processor, and better graphics capabilities.",
            "The upgraded product was the only hardware announcement at the opening Macworld keynote, which was "
            "delivered by Phil Schiller, senior VP for worldwide product m",
        ),
        (
            "With a 17-inch MacBook Pro update unveiled at today's Macworld 2009 keynote, Apple has finally brought "
            "an entire line of Mac portables into view.",
            "The largest member of the MacBook family now comes with a faster front-side bus and processor, Nvidia "
            "graphics, DisplayPort interconnect with HDCP content prote",
        ),
        (
            "Today may be Apple's last Macworld Expo appearance but Apple came bearing gifts.",
            "At today's keynote event, Apple introduced a collection of new and refreshed software and hardware "
            "products to show off on stage. Apple's first hardware announc",
        ),
    ],
    "wwdc-2012": [
        (
            "Apple unveils new MacBook Pro with Ivy Bridge at WWDC",
            "posted Jun 11th, 2012 at 1:23 PM Apple is certainly making WWDC a hardware conference this year - - it "
            "just unveiled a refresh of the existing MacBook Pro runni",
        ),
        (
            "New MacBook Air models officially unveiled with Ivy Bridge upgrade",
            "As rumored, new 11 - inch and 13 - inch MacBook Air models have just been officially announced by Apple "
            "at WWDC 2012. Unsurprisingly, Apple is keeping pace with",
        ),
        (
            "Apple unveils new MacBook Pro with Ivy Bridge at WWDC",
            "? Apple is certainly making WWDC a hardware conference this year - - it just unveiled a new MacBook Pro "
            "running Intel's newer Ivy Bridge processors on the San F",
        ),
        (
            "Apple unveils cheaper Ivy Bridge - powered MacBook Air",
            "Apple has chosen WWDC week to announce an update to its MacBook Air line. It may lack the Retina display "
            "of its newly upgraded, headline - grabbing cousin, the ",
        ),
    ],
}


def test_two_events_about_one_subject_stay_apart() -> None:
    items, labels = [], []
    for label, reports in LAUNCHES.items():
        for n, (title, lead) in enumerate(reports):
            url = f"https://example.com/{label}/{n}"
            items.append(Item(id=f"{label}:{n}", source="news", url=url, title=title, text=lead))
            labels.append(label)
    for order in (items, list(reversed(items))):
        deduper = Deduper(topic="Apple")
        deduper.add(order)
        stories = [deduper.cluster_id(item.id) for item in items]
        by_event = {label: {s for s, lab in zip(stories, labels, strict=True) if lab == label} for label in LAUNCHES}
        assert not by_event["macworld-2009"] & by_event["wwdc-2012"], stories
        assert len(by_event["macworld-2009"]) == len(by_event["wwdc-2012"]) == 1, "one event's reports, one story"
