"""Language detection: one text at a time and a whole batch at once give the same answers."""

from __future__ import annotations

from research.language import FEW_TEXTS, detect_language, detect_languages, with_languages
from tests.research.fake_sources import make_item
from tests.research.labelled_headlines import labelled_items

SAMPLES = [
    "Tesla recalls 239,000 vehicles over rearview camera failure",
    "Bundesregierung beschließt neues Klimaschutzgesetz nach langer Debatte",
    "Le gouvernement annonce une réforme des retraites très contestée",
    "El Banco Central sube los tipos de interés por tercera vez este año",
    "深度求索发布新一代开源大模型，性能比肩国际顶尖水平",
    "東京五輪、開幕式は無観客で実施へ　組織委が発表",
    "Центробанк повысил ключевую ставку до 16 процентов",
    "삼성전자, 3분기 영업이익 10조원 돌파",
    "การเลือกตั้งทั่วไปจะจัดขึ้นในเดือนพฤษภาคม",
    "BREAKING: MARKETS TUMBLE AS OIL PRICES SOAR",
    "OK",
    "",
    "2024 - 25 : 3",
    "AI",
    "中国",
    "   spaces   and\nnew lines   between   words of English text  ",
]


def test_a_batch_gets_exactly_the_answers_of_one_text_at_a_time() -> None:
    items, _ = labelled_items()
    texts = [*SAMPLES, *(f"{item.title}\n{item.text[:300]}" for item in items)]
    # Long texts among short ones, so the batch reads its last texts byte by byte after stepping the rest together.
    texts.append(" ".join(SAMPLES[:3]) * 20)
    one_by_one = [detect_language(text) for text in texts]
    assert detect_languages(texts) == one_by_one
    assert detect_languages(texts[: FEW_TEXTS - 2]) == one_by_one[: FEW_TEXTS - 2]
    assert detect_languages([]) == []
    assert one_by_one[:10] == ["en", "de", "fr", "es", "zh", "ja", "ru", "ko", "th", "en"]
    assert one_by_one[10:12] == [None, None]  # too short or empty: no guess
    assert one_by_one[12] is None and one_by_one[13] is None  # no letters, or two Latin letters: not enough
    assert one_by_one[14] is not None  # two Han characters are a headline


def test_items_without_a_language_get_it_in_one_batch_and_keep_their_order() -> None:
    items = [
        make_item("news", "de", title=SAMPLES[1], language=None),
        make_item("news", "known", title=SAMPLES[0], language="fr"),  # a stated language is kept as it is
        make_item("news", "short", title="OK", language=None),
        make_item("news", "ja", title=SAMPLES[5], language=None),
    ]
    languages = [item.language for item in with_languages(items)]
    assert languages == ["de", "fr", None, "ja"]
