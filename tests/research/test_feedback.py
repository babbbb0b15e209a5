"""`reader_view`, the one seam where a reader's marks meet a shared digest: nothing changes without marks, a mute
leaves out only stories every outlet of which is muted, stories like a 👎 go and like a 👍 come first, with reasons."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np

from research import Mark, StoryFeatures, StoryVector, reader_view, story_features, story_vector
from research.feedback import DEFAULT_TUNING, LINEAR_MAX_SIZE, MarkModel, VectorModel, fit_linear_rule
from sources import Item


def _story(title: str, *outlets: str) -> StoryFeatures:
    items = [Item(id=f"{title}-{o}", source="news", url=f"https://{o}/{abs(hash(title))}", title=title, language="en")
             for o in outlets]  # fmt: skip
    return story_features(items, topic="news")


GPU = _story("Nvidia unveils Blackwell GPU chips for datacenters", "chipwire.com")
GPU_AGAIN = _story("AMD counters Nvidia with datacenter GPU chips", "othertech.com")
POP = _story("Pop singer Taylor Swift announces stadium tour", "celebgossip.net")
POP_AGAIN = _story("Taylor Swift stadium tour sells out", "celebgossip.net", "chipwire.com")
RATES = _story("Central bank raises interest rates", "moneydaily.org")


def test_without_marks_the_digest_is_as_it_was() -> None:
    view = reader_view([GPU, POP, RATES], [])
    assert [d.index for d in view.kept] == [0, 1, 2] and view.dropped == () and not view.changed


def test_a_story_like_a_marked_down_one_is_left_out_and_one_like_a_marked_up_one_comes_first() -> None:
    marks = [Mark(id=1, kind="less", features=POP), Mark(id=2, kind="more", features=GPU)]
    view = reader_view([RATES, POP_AGAIN, GPU_AGAIN], marks)

    assert [d.index for d in view.kept] == [2, 0]
    [dropped] = view.dropped
    assert dropped.index == 1 and dropped.mark_id == 1 and "Taylor Swift" in dropped.reason
    assert view.kept[0].mark_id == 2 and "marked 👍" in view.kept[0].reason


def test_a_muted_outlet_leaves_out_only_stories_it_alone_reports() -> None:
    mute = Mark(id=3, kind="mute", features=StoryFeatures(title="celebgossip.net", outlets=("CelebGossip.net",)))
    view = reader_view([POP, POP_AGAIN, RATES], [mute])

    assert [d.index for d in view.kept] == [1, 2]  # POP_AGAIN is also carried by chipwire.com
    assert [(d.index, d.reason) for d in view.dropped] == [(0, "its outlet celebgossip.net is muted")]


def test_features_weigh_the_clustering_way_and_leave_the_topic_out() -> None:
    assert GPU.outlets == ("chipwire.com",)
    assert "news" not in _story("Breaking news about GPU chips", "a.com").terms
    assert abs(sum(w * w for w in GPU.terms.values()) - 1) < 1e-3


def test_the_marks_teach_a_kind_of_story_not_just_the_marked_ones() -> None:
    liked = [
        _story("Apple unveils new iPhone with faster chip", "techwire.com"),
        _story("Samsung Galaxy phone gets software update", "techwire.com"),
        _story("Google Android app store adds new phone features", "gadgets.net"),
    ]
    disliked = [
        _story("Oscar winning actress stars in new film", "celebgossip.net"),
        _story("Hollywood film premiere draws movie stars", "showbiz.com"),
        _story("Actor cast in film sequel, studio says", "celebgossip.net"),
    ]
    marks = [Mark(id=n, kind="more", features=f) for n, f in enumerate(liked, start=1)]
    marks += [Mark(id=n, kind="less", features=f) for n, f in enumerate(disliked, start=4)]
    film = _story("Studio delays superhero film starring Oscar actor", "moviebuzz.org")
    phone = _story("New phone app lets Android users edit photos", "moviebuzz.org")
    weather = _story("Storm brings heavy snow to the north", "moviebuzz.org")

    view = reader_view([weather, film, phone], marks)

    assert [d.index for d in view.dropped] == [1]  # like the marked-down films, though no headline is repeated
    assert "marked down" in view.dropped[0].reason
    assert [d.index for d in view.kept] == [2, 0]  # the phone story comes first; the unrelated one stays
    model = MarkModel([m for m in marks if m.kind == "more"], [m for m in marks if m.kind == "less"], DEFAULT_TUNING)
    assert model.log_odds(phone) > 0 > model.log_odds(film)
    assert model.log_odds(weather) == 0.0  # no evidence either way: left as it was


def test_marks_of_one_kind_only_still_leave_unrelated_stories_alone() -> None:
    marks = [Mark(id=1, kind="less", features=POP), Mark(id=2, kind="fewer", features=POP_AGAIN)]
    view = reader_view([RATES, _story("Taylor Swift adds tour dates", "celebgossip.net")], marks)
    assert [d.index for d in view.kept] == [0] and [d.index for d in view.dropped] == [1]


# ---- with an embedding model: the stories' vectors decide --------------------------------------------------------

DIRECTIONS = {"tech": (1.0, 0.0, 0.0), "film": (0.0, 1.0, 0.0), "money": (0.0, 0.0, 1.0)}


def _embedded(features: StoryFeatures, kind: str, *, model: str = "test:embed@native") -> StoryFeatures:
    """The story with the vector an embedding model would give a story of that kind (a little of the others)."""
    values = [x + 0.1 for x in DIRECTIONS[kind]]
    return replace(features, vector=story_vector([values], model=model))


def _marks(*pairs: tuple[str, StoryFeatures]) -> list[Mark]:
    return [Mark(id=n, kind=kind, features=f) for n, (kind, f) in enumerate(pairs, start=1)]  # type: ignore[arg-type]


# Marked stories and new ones share no word and no outlet: the words cannot tell them apart.
LIKED = _story("Apple unveils new iPhone with faster chip", "techwire.com")
DISLIKED = _story("Oscar winning actress stars in new film", "celebgossip.net")
NEW_FILM = _story("Cruise returns as pilot in delayed sequel", "moviebuzz.org")
NEW_PHONE = _story("Samsung Galaxy update brings battery savings", "moviebuzz.org")
NEW_RATES = _story("Central bank raises interest rates", "moneydaily.org")


def test_with_vectors_a_story_close_in_meaning_to_the_marked_down_ones_is_left_out_though_no_word_is_shared() -> None:
    marks = _marks(("more", _embedded(LIKED, "tech")), ("less", _embedded(DISLIKED, "film")))
    stories = [_embedded(NEW_RATES, "money"), _embedded(NEW_FILM, "film"), _embedded(NEW_PHONE, "tech")]

    view = reader_view(stories, marks)

    [dropped] = view.dropped
    assert dropped.index == 1 and dropped.by == "vectors" and dropped.mark_id == 2
    assert "close in meaning to stories you marked 👎" in dropped.reason and "Oscar winning actress" in dropped.reason
    assert [d.index for d in view.kept] == [2, 0]  # like the 👍 story first; the unrelated one stays
    assert view.kept[0].by == "vectors" and "marked 👍" in view.kept[0].reason and view.kept[0].mark_id == 1


def test_without_vectors_the_words_decide_as_before() -> None:
    marks = _marks(("more", _embedded(LIKED, "tech")), ("less", _embedded(DISLIKED, "film")))
    view = reader_view([NEW_RATES, NEW_FILM, NEW_PHONE], marks)  # the stories have no vector

    assert view.dropped == () and [d.index for d in view.kept] == [0, 1, 2]
    assert {d.by for d in view.kept} == {"words"}


def test_vectors_of_another_model_or_marks_without_vectors_leave_the_words_to_decide() -> None:
    other_model = [_embedded(NEW_FILM, "film", model="other:model@768")]
    marks = _marks(("more", _embedded(LIKED, "tech")), ("less", _embedded(DISLIKED, "film")))
    assert [d.by for d in reader_view(other_model, marks).kept] == ["words"]

    unembedded_down = _marks(("more", _embedded(LIKED, "tech")), ("less", DISLIKED))
    assert [d.by for d in reader_view([_embedded(NEW_FILM, "film")], unembedded_down).kept] == ["words"]


def test_a_story_vector_is_its_reports_mean_and_survives_json() -> None:
    vector = story_vector([[1.0, 0.0], [0.0, 1.0]], model="m@native")
    assert vector is not None and abs(vector.values[0] - 2**-0.5) < 1e-9
    assert story_vector([], model="m") is None and story_vector([[1.0], [1.0, 0.0]], model="m") is None

    features = replace(GPU, vector=vector)
    again = StoryFeatures.from_json(json.loads(json.dumps(features.to_json())))
    assert again.vector is not None and again.vector.model == "m@native"
    assert max(abs(a - b) for a, b in zip(again.vector.values, vector.values, strict=True)) < 1e-3
    assert StoryVector.from_json({"model": "m", "f16": "not base64!"}) is None
    assert StoryFeatures.from_json({"title": "old mark"}).vector is None


def test_with_several_marks_the_cut_is_the_level_the_readers_own_liked_stories_reach() -> None:
    def embedded(title: str, values: list[float]) -> StoryFeatures:
        return replace(_story(title, "wire.com"), vector=story_vector([values], model="m@native"))

    liked = [embedded(f"liked {n}", v) for n, v in enumerate([[1, 0, 0.3, 0], [1, 0, 0, 0.3], [1, 0, -0.3, 0]])]
    disliked = [embedded(f"disliked {n}", v) for n, v in enumerate([[0, 1, 0.3, 0], [0, 1, 0, 0.3], [0, 1, 0, -0.3]])]
    marks = _marks(*[("more", f) for f in liked], *[("less", f) for f in disliked])
    typical = embedded("typical", [1, 0, 0, -0.3])
    leaning = embedded("leaning", [1, 0.8, 0, 0])  # closer to the 👍 side, but far less than the 👍 stories are

    view = reader_view([leaning, typical], marks)
    model = VectorModel([m for m in marks if m.kind == "more"], [m for m in marks if m.kind == "less"], DEFAULT_TUNING)
    margin = model.closest(leaning, 0)[0] - model.closest(leaning, 1)[0]

    assert 0 < margin < model.threshold("m@native")
    assert [d.index for d in view.kept] == [1] and [d.index for d in view.dropped] == [0]
    assert view.dropped[0].by == "vectors" and "further from those you marked 👍" in view.dropped[0].reason


# ---- a reader with many marks: a line through them decides instead of the neighbours' vote ----------------------

# The kind is the sign of a small first coordinate; the rest is an angle on a circle that says nothing of the kind:
# 👍 and 👎 stories lie all around it, the 👎 ones several times denser. A story's closest marked stories are then 👎
# whatever its kind, so the vote cannot tell the kinds apart (on the reader's own marks neither: it keeps what the
# reader does not want); a line through every mark reads the first coordinate.
SIGN = 0.1


def _circle(name: str, sign: float, angle: float) -> StoryFeatures:
    values = [sign * SIGN, math.cos(angle), math.sin(angle)]
    return StoryFeatures(title=name, outlets=("wire.com",), vector=story_vector([values], model="m@native"))


def _long_reader(ups: int, downs: int) -> list[Mark]:
    liked = [_circle(f"liked {n}", 1, 2 * math.pi * n / ups + 0.01) for n in range(ups)]
    disliked = [_circle(f"disliked {n}", -1, 2 * math.pi * n / downs) for n in range(downs)]
    marks = [Mark(id=n, kind="more", features=f) for n, f in enumerate(liked, start=1)]
    return marks + [Mark(id=len(marks) + n, kind="less", features=f) for n, f in enumerate(disliked, start=1)]


def _switch_point() -> tuple[int, int]:
    """The fewest 👍 and 👎 marks at which the default tuning switches to the line."""
    side = DEFAULT_TUNING.linear_min_side
    return side, max(side, DEFAULT_TUNING.linear_min_marks - side)


WANTED = _circle("wanted", 1, 3 * math.pi / 4)
UNWANTED = _circle("unwanted", -1, 3 * math.pi / 4 + 0.05)
UNWANTED_ELSEWHERE = _circle("unwanted, elsewhere", -1, math.pi / 4)


def test_a_reader_with_many_marks_is_decided_by_the_line_and_one_with_fewer_by_the_vote() -> None:
    ups, downs = _switch_point()
    stories = [WANTED, UNWANTED_ELSEWHERE]

    at_the_point = reader_view(stories, _long_reader(ups, downs))
    one_down_fewer = reader_view(stories, _long_reader(ups, downs - 1))
    one_up_fewer = reader_view(stories, _long_reader(ups - 1, downs))

    assert {d.by for d in (*at_the_point.kept, *at_the_point.dropped)} == {"linear"}
    assert {d.by for d in (*one_down_fewer.kept, *one_down_fewer.dropped)} == {"vectors"}
    assert {d.by for d in (*one_up_fewer.kept, *one_up_fewer.dropped)} == {"vectors"}
    model = VectorModel([m for m in _long_reader(ups, downs) if m.kind == "more"], [], DEFAULT_TUNING)
    assert model.linear("m@native") is None  # no 👎 side: nothing to draw a line against


def test_marks_a_line_separates_decide_stories_the_vote_gets_wrong() -> None:
    marks = _long_reader(*_switch_point())
    stories = [WANTED, UNWANTED, UNWANTED_ELSEWHERE]

    by_vote = reader_view(stories, marks, tuning=replace(DEFAULT_TUNING, linear_min_marks=10**9))
    by_line = reader_view(stories, marks)

    assert [d.index for d in by_vote.kept if d.index > 0]  # the vote keeps what the reader does not want
    assert [d.index for d in by_line.kept] == [0] and [d.index for d in by_line.dropped] == [1, 2]
    assert by_line.kept[0].by == "linear" and "on the side of the stories you marked 👍" in by_line.kept[0].reason
    assert "as all your marks draw the line" in by_line.dropped[0].reason


def test_many_marks_no_line_can_separate_stay_with_the_vote() -> None:
    # 👍 stories about two opposite subjects, 👎 ones about the two between: no line tells them apart, the vote does.
    ups, downs = _switch_point()
    liked = [_circle(f"liked {n}", 0, (n % 2) * math.pi + 0.3 * (n / ups - 0.5)) for n in range(ups)]
    disliked = [
        _circle(f"disliked {n}", 0, math.pi / 2 + (n % 2) * math.pi + 0.3 * (n / downs - 0.5)) for n in range(downs)
    ]
    marks = [Mark(id=n, kind="more", features=f) for n, f in enumerate(liked, start=1)]
    marks += [Mark(id=len(marks) + n, kind="less", features=f) for n, f in enumerate(disliked, start=1)]

    view = reader_view(
        [_circle("liked subject", 0, math.pi + 0.05), _circle("disliked subject", 0, math.pi / 2)], marks
    )

    assert [d.by for d in view.kept] == ["vectors"] and [d.index for d in view.kept] == [0]
    assert [d.by for d in view.dropped] == ["vectors"]


def test_the_line_is_a_logistic_regression_cut_at_the_level_of_the_readers_own_liked_stories() -> None:
    rng = np.random.default_rng(7)
    ups = rng.normal(size=(30, 8)) + np.r_[1.0, np.zeros(7)]
    downs = rng.normal(size=(60, 8)) - np.r_[1.0, np.zeros(7)]
    line = fit_linear_rule(ups, downs, penalty=1.0)
    wide = fit_linear_rule(np.hstack([ups, np.zeros((30, 400))]), np.hstack([downs, np.zeros((60, 400))]), penalty=1.0)

    assert line.weights[0] > 0 and line.score(ups).mean() > 0 > line.score(downs).mean()
    assert np.allclose(wide.weights[:8], line.weights) and np.allclose(wide.weights[8:], 0)  # fitted in the marks' span
    exact = [fit_linear_rule(np.delete(ups, i, 0), downs, penalty=1.0).score(ups[i]) for i in range(5)]
    assert np.allclose(line.ups_left_out[:5], exact, atol=0.05)  # each liked story scored as if left out
    assert (line.ups_left_out <= line.score(ups) + 1e-9).all()
    tuning = replace(DEFAULT_TUNING, linear_quantile=0.1)
    assert line.threshold(tuning) == float(np.quantile(line.ups_left_out, 0.1))
    assert line.rank(line.threshold(tuning), tuning) == 0.0
    assert abs(line.rank(float(np.median(line.ups_left_out)), tuning) - 1.0) < 1e-9


def test_with_long_vectors_the_line_reads_the_newest_marks_so_a_changed_taste_wins() -> None:
    """Past `LINEAR_MAX_SIZE` marks on vectors longer than that, the line is fitted on the newest marks (a fit's
    cost grows with the cube of the smaller of the two): a reader who liked one kind for 600 marks and the other
    for the last 400 is decided by the newer taste."""
    padding = [0.0] * LINEAR_MAX_SIZE  # vectors longer than the cap

    def story(name: str, sign: float, angle: float) -> StoryFeatures:
        values = [sign * SIGN, math.cos(angle), math.sin(angle), *padding]
        return StoryFeatures(title=name, outlets=("wire.com",), vector=story_vector([values], model="m@native"))

    def period(liked_sign: float, ups: int, downs: int, start: int) -> list[tuple[str, StoryFeatures]]:
        liked = [("more", story(f"liked {start + n}", liked_sign, 2 * math.pi * n / ups + 0.01)) for n in range(ups)]
        disliked = [
            ("less", story(f"disliked {start + n}", -liked_sign, 2 * math.pi * n / downs)) for n in range(downs)
        ]
        return liked + disliked

    old, new = period(1, 30, 570, 0), period(-1, 20, 380, 1000)
    marks = [Mark(id=n, kind=kind, features=f) for n, (kind, f) in enumerate(old + new, start=1)]
    now_wanted, once_wanted = story("now wanted", -1, 3 * math.pi / 4), story("once wanted", 1, math.pi / 4)

    view = reader_view([once_wanted, now_wanted], marks)

    assert len(marks) > LINEAR_MAX_SIZE
    assert [(d.index, d.by) for d in view.kept] == [(1, "linear")]
    assert [(d.index, d.by) for d in view.dropped] == [(0, "linear")]
