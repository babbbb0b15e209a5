"""`reader_view`, the one seam where a reader's marks meet a shared digest: nothing changes without marks, a mute
leaves out only stories every outlet of which is muted, stories like a 👎 go and like a 👍 come first, with reasons."""

from __future__ import annotations

from research import Mark, StoryFeatures, reader_view, story_features
from research.feedback import DEFAULT_TUNING, MarkModel
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
