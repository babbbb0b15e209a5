"""Story terms: acronyms written in a headline and those its capitalised names spell."""

from __future__ import annotations

import math

from research import terms
from research.terms import (
    CJK_UNKNOWN_FREQUENCY,
    HIRAGANA_WORD_FREQUENCY,
    RARE_FREQUENCY,
    acronym_term,
    acronyms,
    rarity,
    story_terms,
)


def test_written_acronyms_and_the_names_that_spell_them() -> None:
    found = acronyms("BoE's Carney says MPs and the UK economy are not close to overheating")
    assert found.written == {"boe", "mps", "uk"}
    spelled = acronyms("Bank of England has no control over soaring house prices").spelled
    assert "boe" in spelled, "function words between the names may count"
    assert "be" in spelled, "or not"
    assert acronyms("American Eagle Outfitters to Release Quarterly Earnings").spelled >= {"ae", "aeo"}
    # Either side becomes the term the written word gets in the headline's own terms, with its rarity.
    term = acronym_term("mps", "en")
    assert term is not None
    assert term[0] in story_terms("MPs question Carney", "en").terms
    assert term[1] == story_terms("MPs question Carney", "en").rarity[term[0]]


def test_what_is_not_an_acronym() -> None:
    # A headline set in capitals: every short word would look like an acronym.
    assert acronyms("GRANDMOTHER KILLED BY DRUNK DRIVER IN HIT AND RUN IN QUEENS").written == frozenset()
    # Times of day and single capitals are no acronyms; "The" starts no name.
    assert acronyms("Climber found at 8:05 AM, rescue team says").written == frozenset()
    assert "tv" not in acronyms("The Voice: blind auditions continue").spelled
    # A possessive does not break a name: "McDonald's Corp" is one run of names.
    assert "mc" in acronyms("McDonald's Corp shares fall").spelled
    assert acronyms("トヨタ、リコール200万台") == acronyms("all lower case, no names")


def test_terms_of_every_script_read_by_its_segmenter() -> None:
    # Chinese by jieba's dictionary (rjieba), traditional characters read as simplified: words, not bigrams.
    assert story_terms("華為發布麒麟芯片", "zh").terms == ("华为", "发布", "麒麟", "芯片")
    assert story_terms("华为发布麒麟芯片，苹果股价下跌", "zh").terms[-3:] == ("苹果", "股价", "下跌")
    # Japanese by MeCab: dictionary words, and Han without kana is Japanese when the item says so...
    assert story_terms("東京都知事選挙、2020年7月に投開票", "ja").terms == (
        "東京", "都知事", "選挙", "2020", "年", "7", "月", "に", "投開票",
    )  # fmt: skip
    # ...and Chinese (jieba's words, simplified) when it says nothing of Japanese.
    assert story_terms("東京都知事選挙", "en").terms == ("东京都", "知事", "选", "挙")
    # Hangul keeps character bigrams, a lone letter is no term; each script of a mixed text by its own reader.
    assert story_terms("한 서울시 발표", "ko").terms == ("서울", "울시", "발표")
    mixed = story_terms("Apple 与华为 2024年 발표 서울시 the iPhone's sales", None)
    assert mixed.terms == ("appl", "与", "华为", "2024", "年", "발표", "서울", "울시", "the", "iphon", "sale")
    assert all(weight > 0 for weight in mixed.rarity.values())
    # A limit stops after the run that reaches it.
    limited = story_terms("東京都知事選挙、2020年7月に投開票、大阪府知事選挙", "ja", limit=3)
    assert limited.terms == ("東京", "都知事", "選挙")


def test_chinese_and_japanese_words_are_read_the_way_outlets_wordings_meet() -> None:
    # A loanword with or without its long-vowel mark is one term, weighed as written.
    assert story_terms("ハマース", "ja").terms == story_terms("ハマス", "ja").terms == ("ハマス",)
    assert story_terms("ハマース", "ja").rarity["ハマス"] == rarity("ハマース", "ja") != rarity("ハマス", "ja")
    # A figure with or without its thousands comma is one figure in CJK text (English keeps its reading).
    assert story_terms("死者1,000人", "ja").terms == story_terms("死者1000人", "ja").terms == ("死者", "1000", "人")
    assert story_terms("1,000 dead", "en").terms == ("1.000", "dead")
    # A word the frequency list does not know is rare, not rarer than every word it lists ("秋田放送": a
    # broadcaster's name in MeCab's dictionary, not in wordfreq's); Hangul bigrams keep the general rule.
    assert rarity("秋田放送", "ja") == -math.log(RARE_FREQUENCY)
    assert story_terms("秋田放送によると", "ja").rarity["秋田放送"] == -math.log(CJK_UNKNOWN_FREQUENCY)
    assert story_terms("룰룰", "ko").rarity["룰룰"] == -math.log(RARE_FREQUENCY)
    # A word of hiragana alone (a particle, an ending) is as common as a particle, whatever the list says of it;
    # kanji and katakana words keep their rarity.
    according = story_terms("共同通信によると", "ja").rarity
    assert rarity("よる", "ja") > -math.log(HIRAGANA_WORD_FREQUENCY)
    assert according["よる"] == -math.log(HIRAGANA_WORD_FREQUENCY)
    assert according["に"] == rarity("に", "ja") < -math.log(HIRAGANA_WORD_FREQUENCY)
    assert according["共同通信"] == rarity("共同通信", "ja")


def test_words_read_once_give_the_same_terms_again() -> None:
    # The second reading looks each word up where the first kept it, including words that are no term ("a").
    text = "A recall: Toyota recalls 2m cars in a recall of 2 million"
    first = story_terms(text, "en")
    assert first.terms == ("recal", "toyota", "2", "million", "car", "in", "of")
    second = story_terms(text, "en")
    assert second == first
    assert story_terms(text, "en", limit=2).terms == ("recal", "toyota")


def test_word_lists_give_wordfreqs_frequency_for_every_word_that_counts() -> None:
    # The lists are held as hashes and buckets, only the words more frequent than RARE_FREQUENCY (the rest score as
    # unlisted anyway): every rarity must still be the one wordfreq's whole list gives, "つ" and "d0" apart (a str's
    # own hash cannot tell them), and a word the list lacks must not be found.
    import wordfreq

    for language in ("ja", "de"):
        whole = wordfreq.get_frequency_dict(language, wordlist="best")
        kept = terms._frequencies(language)
        assert 0 < len(kept) < len(whole)
        for word, frequency in whole.items():
            assert max(kept.frequency(word), RARE_FREQUENCY) == max(frequency, RARE_FREQUENCY), word
        assert all(kept.frequency(word + "\x01") == 0.0 for word in list(whole)[:5000])
    assert terms._frequencies("ja").frequency("つ") != terms._frequencies("ja").frequency("d0")
    assert rarity("zzqxv", "en") == -math.log(RARE_FREQUENCY)
    assert rarity("the", "en") == -math.log(wordfreq.get_frequency_dict("en", wordlist="best")["the"])
