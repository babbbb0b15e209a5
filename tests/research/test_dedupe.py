"""De-duplication: exact (id, URL) across calls, near-duplicate clustering, and its quality on labelled data."""

from __future__ import annotations

import random
from datetime import timedelta

from research.dedupe import LEAD_CHARS, Deduper, cluster_items, fingerprint, pair_scores
from research.terms import tokens
from sources.base import Engagement, Item
from tests.research.fake_sources import BASE_TIME, make_item
from tests.research.labelled_headlines import labelled_items

# The hand-written headlines are a regression test only (the method is tuned and measured on real labelled news in
# bench/cluster_real.py). Recall is set a little under what the clustering gives (0.92 at the default threshold).
# Precision (0.804) sits on its floor since the one-shared-term penalty went: real news gained recall without it,
# and the merges it lets through here are one-subject pairs (a GPT-5 headline joining a Cloudflare outage through
# "ChatGPT"); a change that lets more through fails.
PRECISION_FLOOR = 0.8
RECALL_FLOOR = 0.88


def test_labelled_set_is_big_and_mixed() -> None:
    items, labels = labelled_items()
    assert len(items) >= 120
    stories = set(labels)
    assert sum(labels.count(s) >= 3 for s in stories) >= 20, "many stories told by several outlets"
    assert {i.language for i in items} >= {"en", "zh", "ja", "de", "es", "fr", "ru", "ko"}


def test_clustering_precision_and_recall_on_labelled_headlines_in_any_order() -> None:
    items, labels = labelled_items()

    def partition(order: list[int]) -> tuple[frozenset[frozenset[str]], float, float]:
        deduper = Deduper()
        result = deduper.add(items[i] for i in order)
        assert len(result.new) == len(items)
        predicted = [deduper.cluster_id(item.id) or "" for item in items]
        scores = pair_scores(predicted, labels)
        groups: dict[str, set[str]] = {}
        for item, cluster in zip(items, predicted, strict=True):
            groups.setdefault(cluster, set()).add(item.id)
        return frozenset(frozenset(g) for g in groups.values()), scores.precision, scores.recall

    stories, precision, recall = partition(list(range(len(items))))
    print(f"\nprecision {precision:.3f} recall {recall:.3f}")
    assert precision >= PRECISION_FLOOR
    assert recall >= RECALL_FLOOR
    for seed in range(3):
        order = list(range(len(items)))
        random.Random(seed).shuffle(order)
        assert partition(order)[0] == stories, "the same items make the same stories in any input order"


def test_pair_scores_counts_pairs() -> None:
    scores = pair_scores(["a", "a", "b", "b"], ["x", "x", "x", "y"])
    # predicted pairs: (0,1), (2,3); true pairs: (0,1), (0,2), (1,2)
    assert (scores.predicted_pairs, scores.true_pairs, scores.correct_pairs) == (2, 3, 1)
    assert (scores.precision, round(scores.recall, 3)) == (0.5, 0.333)


def test_exact_duplicates_by_id_and_by_url_are_dropped_across_calls() -> None:
    deduper = Deduper()
    first = make_item("hn", "1", url="https://Example.com/a?utm_source=x#top")
    again_by_id = make_item("hn", "1", url="https://other.example/b")
    again_by_url = make_item("news", "zz", url="https://example.com/a/")
    fresh = make_item("news", "2", title="Something else entirely")

    one = deduper.add([first, first])
    assert [i.id for i in one.new] == ["hn:1"]
    assert [i.id for i in one.duplicates] == ["hn:1"], "a repeat inside one batch is a duplicate too"

    two = deduper.add([again_by_id, again_by_url, fresh])
    assert [i.id for i in two.new] == ["news:2"]
    assert [i.id for i in two.duplicates] == ["hn:1", "news:zz"]
    assert len(deduper) == 2
    assert deduper.seen(again_by_url)


def test_same_story_from_two_sources_is_one_cluster_with_both_urls_and_a_representative() -> None:
    reuters = Item(
        id="news:1",
        source="news",
        url="https://reuters.example/tesla-recall",
        title="Tesla recalls 239,000 vehicles over rearview camera failure",
        text="Tesla is recalling about 239,000 vehicles in the United States because a faulty circuit board "
        "can cause the rearview camera to fail.",
        engagement=Engagement(),
    )
    hn = Item(
        id="hn:2",
        source="hn",
        url="https://electrek.example/tesla-ota-recall",
        title="Tesla issues OTA recall for 239k cars after rearview camera glitch",
        text="A software update will fix the circuit board issue that can make rearview cameras go dark.",
        engagement=Engagement(points=120, comments=80),
    )
    ford = Item(
        id="news:3",
        source="news",
        url="https://reuters.example/ford-plant",
        title="Ford to cut 4,000 jobs in Europe as electric car sales slow",
        text="Ford will eliminate about 4,000 positions in Germany and Britain by 2027, citing weak demand for "
        "its electric models.",
    )
    deduper = Deduper()
    first = deduper.add([reuters, ford])
    second = deduper.add([hn])
    assert first.new_clusters == 2
    assert second.new_clusters == 0, "the HN post joins the Reuters story"
    assert second.cluster_of["hn:2"] == first.cluster_of["news:1"] != first.cluster_of["news:3"]
    tesla = next(c for c in deduper.clusters if c.id == second.cluster_of["hn:2"])
    assert tesla.urls == ["https://reuters.example/tesla-recall", "https://electrek.example/tesla-ota-recall"]
    assert tesla.representative.id == "hn:2", "the most engaged member stands for the story"
    assert tesla.sources == ["news", "hn"]


def test_chinese_and_japanese_headlines_are_segmented_into_words_and_cluster() -> None:
    a = make_item("rsshub", "a", title="华为Mate 80系列正式发布，搭载麒麟9030芯片", text="")
    b = make_item("rsshub", "b", title="华为Mate80发布 麒麟9030加持 售价4699元起", text="")
    c = make_item("rsshub", "c", title="小米YU7正式上市 售价25.35万元起", text="")
    clusters = cluster_items([a, b, c])
    assert sorted(len(cl.members) for cl in clusters) == [1, 2]
    assert {"华为", "麒麟", "发布"} <= fingerprint(a.title, language="zh").tokens, "jieba words, not bigrams"
    assert "トヨタ" in fingerprint("トヨタ、リコール200万台　ブレーキ不具合で", language="ja").tokens
    # Dictionary words (MeCab): a character-statistics segmenter cut these into "前社" + "長" and "法違" + "反".
    livedoor = fingerprint("ライブドア前社長の堀江貴文被告、証券取引法違反で初公判", language="ja")
    assert {"社長", "違反", "堀江"} <= livedoor.tokens
    japanese = [
        make_item("news", "j1", title="日銀、政策金利を据え置き　物価の先行きを慎重に見極め"),
        make_item("news", "j2", title="日銀が金利据え置きを決定、植田総裁「物価見極め」"),
        make_item("news", "j3", title="任天堂、スイッチ2の販売計画を上方修正"),
    ]
    assert sorted(len(cl.members) for cl in cluster_items(japanese)) == [1, 2]


def test_japanese_outlets_wording_one_event_differently_still_meet() -> None:
    """One event in two outlets' Japanese: a loanword written with and without its long-vowel mark ("ハマース" /
    "ハマス"), a figure with and without its thousands comma ("1,000人" / "1000人"). Each pair is one story; a
    look-alike disaster with another death toll and another story about the same country stay apart."""
    titles = {
        "hamas-1": "ハマースが圧勝、自治政府の与党ファタハ敗北",
        "hamas-2": "パレスチナ選挙でハマス勝利",
        "flood-1": "フィリピンの泥流、死者1,000人超か",
        "flood-2": "比の台風被害、死者は1000人を超える見通し",
        "quake": "ジャワ島の地震、死者5,000人超に",
        "decree": "フィリピン大統領、非常事態を宣言",
    }
    deduper = Deduper()
    deduper.add([make_item("news", key, title=title, language="ja") for key, title in titles.items()])
    story = {key: deduper.cluster_id(f"news:{key}") for key in titles}
    assert story["hamas-1"] == story["hamas-2"]
    assert story["flood-1"] == story["flood-2"]
    assert len({story["hamas-1"], story["flood-1"], story["quake"], story["decree"]}) == 4


def test_weights_come_from_the_language_not_the_batch() -> None:
    """A story's key word weighs the same whether the batch holds 2 items or 40 that repeat it: the same pair is
    as similar either way (batch-only weights made a big story's words "common" and lost it)."""
    a = make_item("news", "a", title="Mt. Gox files for bankruptcy protection in Tokyo")
    b = make_item("news", "b", title="Bitcoin exchange Mt. Gox seeks bankruptcy protection")
    crowd = [make_item("news", f"c{n}", title=f"Bitcoin falls after Mt. Gox collapse, day {n}") for n in range(40)]
    small, big = Deduper(), Deduper()
    small.add([a, b])
    big.add([a, b, *crowd])
    assert small.similarity(fingerprint(a.title), fingerprint(b.title)) == big.similarity(
        fingerprint(a.title), fingerprint(b.title)
    )
    assert small.cluster_id("news:a") == small.cluster_id("news:b")
    assert big.cluster_id("news:a") == big.cluster_id("news:b")


def test_a_day_of_items_makes_the_same_stories_inside_a_week_of_them() -> None:
    """What a one-day look-back groups together (and apart), a seven-day look-back over the same items does too."""
    items, _ = labelled_items()
    english = [i for i in items if i.language == "en"]
    day = english[: len(english) // 3]
    one_day, week = Deduper(), Deduper()
    one_day.add(day)
    week.add(english)
    for first in day:
        for second in day:
            same_day = one_day.cluster_id(first.id) == one_day.cluster_id(second.id)
            same_week = week.cluster_id(first.id) == week.cluster_id(second.id)
            assert same_day == same_week, (first.title, second.title)


def test_earlier_stories_keep_their_ids_and_never_merge() -> None:
    deduper = Deduper()
    first = deduper.add(
        [
            make_item("news", "1", title="Tesla recalls 239,000 vehicles over rearview camera failure"),
            make_item("news", "2", title="Ford recalls 850,000 vehicles over fuel pump defect"),
        ]
    )
    bridge = make_item("news", "3", title="Tesla and Ford recall vehicles over rearview camera and fuel pump defects")
    second = deduper.add([bridge])
    assert first.cluster_of["news:1"] != first.cluster_of["news:2"]
    assert deduper.cluster_id("news:1") == first.cluster_of["news:1"]
    assert deduper.cluster_id("news:2") == first.cluster_of["news:2"]
    assert second.cluster_of["news:3"] in {first.cluster_of["news:1"], first.cluster_of["news:2"], "c3"}


def test_every_earlier_batch_is_found_by_a_later_one() -> None:
    """Earlier batches are put in the postings only when a later batch comes: an item of the second batch is still
    found by the third (by a shared term and by an acronym), and the first batch's story keeps its id."""
    deduper = Deduper()
    deduper.add([make_item("news", "1", title="Volcano erupts on Iceland's Reykjanes peninsula, lava reaches town")])
    deduper.add([make_item("news", "2", title="Zanzibar ferry capsizes with 300 passengers aboard off Pemba")])
    deduper.add([make_item("news", "3", title="Bank of England holds rates as inflation eases")])
    third = deduper.add(
        [
            make_item("news", "4", title="Ferry capsizes off Pemba near Zanzibar, 300 passengers aboard"),
            make_item("news", "5", title="BoE holds rates as inflation eases"),
        ]
    )
    assert third.cluster_of["news:4"] == deduper.cluster_id("news:2") == "c2"
    assert third.cluster_of["news:5"] == deduper.cluster_id("news:3") == "c3"
    assert deduper.cluster_id("news:1") == "c1"
    assert third.new_clusters == 0


def test_tokens_and_fingerprint() -> None:
    assert tokens("Nvidia's revenue: $57bn, 9,000 jobs") == ["nvidia", "revenue", "57", "billion", "9.000", "jobs"]
    assert fingerprint("The Chips", "Chip maker", language="en").tokens == frozenset({"the", "chip", "maker"})
    assert fingerprint("Tesla recalls 239,000 cars in 2026", language="en").figures == frozenset({"239.000"})
    assert fingerprint("Tesla recalls two million cars over a steering fault").language == "en", "detected"
    assert fingerprint("Apple stellt neues iPhone in Berlin vor").language == "de"


def test_only_the_lead_of_a_long_text_is_read() -> None:
    # A whole article as the text: its first LEAD_CHARS characters are the lead, the rest is never scanned (a
    # fingerprint costs the lead, not the article). One repeated word keeps the term limit from cutting first.
    lead = ("filler " * LEAD_CHARS)[:LEAD_CHARS]
    assert "zanzibar" not in fingerprint("Ferry news", f"{lead} Zanzibar", language="en").tokens
    assert "zanzibar" in fingerprint("Ferry news", f"{lead[:-20]} Zanzibar", language="en").tokens


def test_words_are_stemmed_in_their_language_and_topic_words_stay_weightless() -> None:
    # Outlets inflect one story's words differently ("fired" / "fires"; "Wahlen" / "Wahl"): Snowball stems meet.
    assert {"coach", "fire"} <= fingerprint("Coach fired", language="en").tokens
    assert "fire" in fingerprint("Team fires its coach", language="en").tokens
    assert fingerprint("Wahlen in Berlin", language="de").tokens & fingerprint("Wahl in Berlin", language="de").tokens
    # The topic is stemmed the way each item's language is, so its words carry no weight in any of them.
    deduper = Deduper(topic="elections Wahlen")
    for title, language, stem in (("Elections called early", "en", "elect"), ("Wahlen vorgezogen", "de", "wahl")):
        terms = fingerprint(title, language=language)
        assert stem in terms.tokens
        weighted = deduper.term_weights(terms)
        assert weighted and stem not in weighted


def _fight(opponent: str, place: str, number: int, *, also: str = "") -> Item:
    wordings = [
        f"Klitschko stops {opponent} to retain heavyweight titles",
        f"Wladimir Klitschko beats {opponent} and keeps his heavyweight belts",
        f"Klitschko retains world heavyweight titles against {opponent}",
        f"Heavyweight champion Klitschko too strong for {opponent}",
    ]
    return make_item(
        "news",
        f"{opponent}-{number}",
        title=wordings[number],
        text=f"Wladimir Klitschko stopped {opponent}{also} in {place} to keep his IBF and WBO heavyweight titles.",
    )


def test_look_alike_events_with_their_own_names_stay_two_stories() -> None:
    # One boxer's two title defences: alike in every word but the opponent and the place, and each fight's items
    # all name its own opponent, which no item of the other names. Average link alone would merge them.
    rahman = [_fight("Rahman", "Mannheim", n) for n in range(4)]
    thompson = [_fight("Thompson", "Bern", n) for n in range(4)]
    deduper = Deduper()
    deduper.add(rahman + thompson)
    fingerprints = [fingerprint(i.title, i.text, language="en") for i in (*rahman, *thompson)]
    cross = [deduper.similarity(a, b) for a in fingerprints[:4] for b in fingerprints[4:]]
    assert sum(cross) / len(cross) >= deduper.threshold, "the two fights are alike enough to merge on words alone"
    stories = {deduper.cluster_id(i.id) for i in rahman}, {deduper.cluster_id(i.id) for i in thompson}
    assert len(stories[0]) == len(stories[1]) == 1
    assert stories[0] != stories[1]

    # When one side's items also name the other's opponent, nothing tells them apart: one story.
    recap = [_fight("Thompson", "Bern", n, also=" after beating Rahman in Mannheim") for n in range(4)]
    together = Deduper()
    together.add(rahman + recap)
    assert len({together.cluster_id(i.id) for i in rahman + recap}) == 1


def test_items_published_days_apart_are_two_stories_unless_worded_alike() -> None:
    """A second fall on one mountain a week later is another story; the same report re-published is not."""
    first = make_item("news", "1", title="Perth climber Mark Vinar presumed dead after fall on Mount Cook ridge")
    first = first.model_copy(update={"published": BASE_TIME - timedelta(days=8)})
    later_title = "British climber Robert Buckley dies in fall in Mount Cook national park"
    later = make_item("news", "2", title=later_title)
    same_week = later.model_copy(
        update={"id": "news:3", "url": "https://example.com/news/3", "published": BASE_TIME - timedelta(days=7)}
    )
    undated = later.model_copy(update={"id": "news:4", "url": "https://example.com/news/4", "published": None})
    apart = Deduper()
    apart.add([first, later])
    assert apart.cluster_id("news:1") != apart.cluster_id("news:2")
    together = Deduper()
    together.add([first, same_week])  # a day apart: the words decide, as without dates
    assert together.cluster_id("news:1") == together.cluster_id("news:3")
    no_date = Deduper()
    no_date.add([first, undated])
    assert no_date.cluster_id("news:1") == no_date.cluster_id("news:4")
    reprinted = make_item("news", "5", title=first.title)
    again = Deduper()
    again.add([first, reprinted])
    assert again.cluster_id("news:1") == again.cluster_id("news:5")  # identical wording still meets


def test_an_item_close_to_one_sub_story_of_a_broad_story_joins_it() -> None:
    """A broad story (the search for a missing jet, and its passengers' stolen passports) has sub-stories; a report
    close to several members of one sub-story joins it although its mean over the whole story is diluted by the
    other. Close to one member only, it stays alone: one shared phrase is not enough."""
    search = [
        "Malaysia Airlines flight MH370 missing over South China Sea",
        "Missing Malaysia Airlines MH370: search widens in South China Sea",
        "Malaysia Airlines MH370 search in South China Sea finds no debris",
    ]
    passports = [
        "Malaysia Airlines MH370 passengers used stolen passports",
        "Stolen passports on Malaysia Airlines MH370 raise terror fears",
        "Interpol: two MH370 passengers travelled on stolen passports",
    ]
    story = [make_item("news", f"s{n}", title=title) for n, title in enumerate(search + passports)]
    close = make_item("news", "close", title="Vietnam navy joins South China Sea search for missing jet debris")
    loose = make_item("news", "loose", title="Vietnam navy scours South China Sea for debris of missing jet")
    for order in (1, -1):
        joined, alone = Deduper(), Deduper()
        joined.add([*story, close][::order])
        alone.add([*story, loose][::order])
        assert {joined.cluster_id(item.id) for item in story} == {joined.cluster_id("news:close")}
        assert {alone.cluster_id(item.id) for item in story} == {"c1" if order == 1 else "c2"}
        assert alone.cluster_id("news:loose") not in {alone.cluster_id(item.id) for item in story}


def test_a_name_spelled_out_meets_the_acronym_another_outlet_writes() -> None:
    """One outlet writes "BoE", another "Bank of England": the same story, though the two headlines share no other
    word. A name spelled out counts as its acronym only once some item of the batch writes that acronym."""
    written = make_item("news", "boe", title="BoE Officials Divided on Economy as Industrial Output Stalls")
    spelled = make_item("news", "bank", title="Bank of England policymakers split over slack in the recovery")
    unrelated = make_item("news", "cb", title="Central bank officials divided on economy as industrial output stalls")
    for order in (1, -1):
        together = Deduper()
        together.add([written, spelled][::order])
        assert together.cluster_id("news:boe") == together.cluster_id("news:bank")
    # The written acronym arriving in a later run finds the earlier story through it.
    later = Deduper()
    later.add([spelled])
    later.add([written])
    assert later.cluster_id("news:boe") == later.cluster_id("news:bank")
    # Without the written acronym the spelled-out name is only its words: nothing in common, two stories.
    apart = Deduper()
    apart.add([unrelated, spelled])
    assert apart.cluster_id("news:cb") != apart.cluster_id("news:bank")
    # Two names with the same initials do not meet when no item writes them as an acronym.
    motors = make_item("news", "gm", title="General Motors recalls small cars over faulty ignition switches")
    mountain = make_item("news", "gmc", title="Green Mountain profit jumps on single-serve coffee pods")
    none_written = Deduper()
    none_written.add([motors, mountain])
    assert (
        none_written.similarity(fingerprint(motors.title, language="en"), fingerprint(mountain.title, language="en"))
        == 0.0
    )


def test_two_sub_stories_of_a_broad_story_bridged_by_a_close_pair_are_one_story() -> None:
    """Real UCI headlines of one Google News story (GM's ignition-switch recall): GM's own probe team, and the
    regulator under fire. Their mean link is diluted under the threshold, so average linkage alone keeps them apart;
    one pair sharing most of its telling words ("GM", "recall") bridges them. Without that pair the two sides stay
    two stories: a mean near the threshold is not enough on its own."""
    probe = [
        "GM recall probe team led by Lehman investigator",
        "GM forms recall probe team",
        "GM Names Lead Investigator in Probe of 13 Deaths",
    ]
    bridge = "GM must address recall soon"
    regulator = [
        "NHTSA Drops the Ball",
        "GM and NHTSA Fail To Protect Public on Ignition Switch Fiasco",
        "Did the NHTSA Also Drop the Ball in GM's Recent Major Recall?",
        "NHTSA Announces New Initiatives to Raise Recall Awareness",
    ]
    sides = (
        [make_item("news", f"p{n}", title=title) for n, title in enumerate([*probe, bridge])],
        [make_item("news", f"r{n}", title=title) for n, title in enumerate(regulator)],
    )
    deduper = Deduper()
    prints = [[fingerprint(i.title, language="en") for i in side] for side in sides]
    cross = [deduper.similarity(a, b) / deduper.threshold for a in prints[0] for b in prints[1]]
    assert 0.8 <= sum(cross) / len(cross) < 1.0, "the two sides' mean link falls short of the threshold"
    assert max(cross) >= 3.0, "one pair between them is close"
    for order in (1, -1):
        together = Deduper()
        together.add([*sides[0], *sides[1]][::order])
        assert len({together.cluster_id(i.id) for i in [*sides[0], *sides[1]]}) == 1

    without_bridge = [i for i in sides[0] if i.title != bridge]
    rest = [deduper.similarity(a, b) / deduper.threshold for a in prints[0][:-1] for b in prints[1]]
    assert sum(rest) / len(rest) >= 0.8 and max(rest) < 3.0
    apart = Deduper()
    apart.add([*without_bridge, *sides[1]])
    assert len({apart.cluster_id(i.id) for i in without_bridge}) == 1
    assert len({apart.cluster_id(i.id) for i in sides[1]}) == 1
    assert apart.cluster_id(without_bridge[0].id) != apart.cluster_id(sides[1][0].id)

    # Across runs: the regulator's reports arriving a run later join the earlier story the same way. Two earlier
    # stories are never bridged: the close pair arriving last joins one of them, and they stay two.
    later = Deduper()
    later.add(sides[0])
    later.add(sides[1])
    assert len({later.cluster_id(i.id) for i in [*sides[0], *sides[1]]}) == 1
    stories = Deduper()
    stories.add(without_bridge)
    stories.add(sides[1])
    stories.add([sides[0][-1]])
    assert stories.cluster_id(sides[0][-1].id) == stories.cluster_id(without_bridge[0].id) == "c1"
    assert {stories.cluster_id(i.id) for i in sides[1]} == {"c2"}
