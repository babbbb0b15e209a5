"""Rebuild the labelled real-news sets in this folder from the public repositories they come from.

Each set is one CSV with the same columns: id, story, outlet, title, text, url, published, language. `story` is
the label made by the set's authors (see README.md beside this file for sources and licences).

Run: uv run python bench/data/build_sets.py <mirror root>
where <mirror root> holds bare clones named `<owner>+<name>/repo` (the search tool's `fetch` makes them):
  pratikaher88/IPythonNotebooks   (the first 6,365 rows of the UCI News Aggregator file)
  cltl/ECB-parser                 (ECB+ corpus XML, 982 documents)
  tm4roon/jawikinews-headline-dataset  (Japanese Wikinews articles with the sources each one cites)
  wmt-conference/wmt21-news-systems, wmt22-news-systems, wmt24-news-systems  (WMT news test documents with their
                                  human translations, en / ja / zh)
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import statistics
import subprocess
import sys
from collections import Counter, OrderedDict
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from xml.etree import ElementTree

HERE = Path(__file__).parent
COLUMNS = ("id", "story", "outlet", "title", "text", "url", "published", "language")
LEAD_SENTENCES = 2
"""Sentences of an ECB+ article kept after its headline: a lead, as a feed would carry it."""


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _git_files(repo: Path, prefix: str) -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in listing.splitlines() if line]


def _write(name: str, rows: list[dict[str, str]]) -> None:
    with (HERE / name).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{name}: {len(rows)} items, {len({r['story'] for r in rows})} stories")


def build_uci(mirror: Path) -> None:
    """UCI News Aggregator: headlines grouped by Google News story id (the STORY column)."""
    text = _git_show(mirror / "pratikaher88+IPythonNotebooks" / "repo", "uci-news-aggregator.csv")
    rows = []
    categories: list[dict[str, str]] = []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("TIMESTAMP") or not row.get("TITLE"):
            continue  # the copy ends in a cut-off line
        published = datetime.fromtimestamp(int(row["TIMESTAMP"]) / 1000, tz=UTC)
        rows.append(
            {
                "id": f"uci-{row['ID']}",
                "story": row["STORY"],
                "outlet": row["PUBLISHER"],
                "title": row["TITLE"],
                "text": "",
                "url": row["URL"],
                "published": published.isoformat(timespec="seconds"),
                "language": "",
            }
        )
        categories.append({"id": f"uci-{row['ID']}", "category": row["CATEGORY"]})
    _write("uci_news_aggregator.csv", rows)
    # The aggregator's own topic label per headline (b business, t science and technology, e entertainment,
    # m health), for bench/feedback_real.py's simulated readers; a file of its own, so the set above is unchanged.
    with (HERE / "uci_news_categories.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ("id", "category"))
        writer.writeheader()
        writer.writerows(categories)


_TOKEN = re.compile(r'<token t_id="\d+" sentence="(\d+)" number="\d+">(.*?)</token>')


def _detokenise(tokens: list[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r"(\d) ([.:,]) (\d)", r"\1\2\3", text)  # "4 . 6", "1 : 12", "52 , 000" were one token
    text = re.sub(r" ([,.;:!?%)\]}'])", r"\1", text)
    text = re.sub(r"([(\[{$]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    text = text.replace("`` ", '"').replace(" ''", '"').replace("&amp;", "&").replace("&quot;", '"')
    return " ".join(text.split())


def _sentences(xml: str) -> list[str]:
    by_sentence: OrderedDict[str, list[str]] = OrderedDict()
    for sentence, token in _TOKEN.findall(xml):
        by_sentence.setdefault(sentence, []).append(token)
    return [_detokenise(tokens) for tokens in by_sentence.values()]


_MONTHS = "january february march april may june july august september october november december"
_DATELINE_WORDS = frozenset(_MONTHS.split()) | {
    "published",
    "updated",
    "posted",
    "last",
    "am",
    "pm",
    "edt",
    "est",
    "pdt",
    "pst",
    "gmt",
    "bst",
    "utc",
    "by",
    "on",
    "at",
    "first",
}


def _is_dateline(sentence: str) -> bool:
    """A date, time or 'Published:' line that some pages put above or below the headline."""
    words = re.findall(r"[A-Za-z]{2,}", sentence)
    return len(words) <= 8 and all(word.lower().rstrip(".") in _DATELINE_WORDS or word.isupper() for word in words)


def build_ecbplus(mirror: Path) -> None:
    """ECB+: news articles on 43 topics, each topic with two look-alike seminal events (ECB and ECB+ halves).

    The story label is topic + half, as in the corpus' own subtopic split. ECB+ articles start with their URL
    and headline; the older ECB articles start with the lead, which then stands as the title.
    """
    repo = mirror / "cltl+ECB-parser" / "repo"
    rows = []
    for path in sorted(
        _git_files(repo, "ECB+/"), key=lambda p: [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", p)]
    ):
        name = path.rsplit("/", 1)[-1]
        match = re.fullmatch(r"(\d+)_(\d+)(ecb|ecbplus)\.xml", name)
        if not match:
            continue
        topic, number, half = match.groups()
        sentences = _sentences(_git_show(repo, path))
        url = ""
        if half == "ecbplus" and sentences and sentences[0].replace(" ", "").startswith("http"):
            url = sentences.pop(0).replace(" ", "")
        while sentences and _is_dateline(sentences[0]):
            sentences.pop(0)
        if not sentences:
            continue
        body = [sentence for sentence in sentences[1:] if not _is_dateline(sentence)]
        title, lead = sentences[0], " ".join(body[:LEAD_SENTENCES])
        rows.append(
            {
                "id": f"ecb-{topic}-{number}-{half}",
                "story": f"{topic}-{half}",
                "outlet": re.sub(r"^https?://(www\.)?", "", url).split("/")[0] if url else "ecb",
                "title": title,
                "text": lead,
                "url": url or f"https://ecb.example/{topic}/{number}",
                "published": "",
                "language": "en",
            }
        )
    _write("ecbplus.csv", rows)


# ---- Japanese Wikinews: the outlets' headlines each article cites, one story per article ----------------------

_JA_SOURCE = re.compile(
    r"『\s*(?P<title>[^『』]+?)\s*』\s*。\s*(?P<outlet>[^、。『』]{1,40}?)\s*、\s*"
    r"(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*日"
)
_JA_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_NEWS_PUBLISHER = re.compile(
    r"新聞|通信|放送|報知|日報|新報|民報|週報|時報|タイムス|日刊|夕刊|スポーツ|スポニチ|ニュース|NEWS|News|テレビ|TV|"
    r"エフエム|CNN|BBC|AFP|ロイター|Reuters|聯合|朝鮮日報|東亜日報|中央日報|人民網|新華|大公網|新浪|毎日|朝日|読売|讀賣|"
    r"産経|日経|NIKKEI|時事|共同|NHK|TBS|NNN|RKB|ITmedia|アイティメディア|ITpro|Impress|Watch|CNET|ZDNet|ZAKZAK|"
    r"ジャーナル|JANJAN|アスキー|RBB|[Ii]nfoseek|excite|ライブドア|livedoor|[Yy]ahoo|ビジネスアイ|Innolife"
)
"""Publishers that are news outlets: newspapers, agencies, broadcasters, news sites. Government bodies, companies,
leagues and encyclopedias cited as primary or background sources publish notices (typhoon bulletins, company
announcements), not reports."""
JA_SOURCE_WINDOW = timedelta(days=7)
"""A cited source dated further than this from the article's other sources is background (an earlier event)."""
JA_YEARS = (2006, 2006)
"""The busiest year of the corpus (a third of its sources): a run of consecutive news, and a set the embedding
path can score whole (all of 2005-2019 would be ~15,000 items)."""
JST = timezone(timedelta(hours=9))


def _ja_detokenise(text: str) -> str:
    """Undo the corpus' MeCab word split: drop every space except one between two Latin letters or digits."""
    return re.sub(r"(?<![A-Za-z0-9]) | (?![A-Za-z0-9])", "", " ".join(text.split()))


def build_jawikinews(mirror: Path) -> None:
    """Japanese Wikinews (tm4roon/jawikinews-headline-dataset, `raw/cleaned-data.tsv.gz`): each article ends with the
    sources its editors cited, as `『headline』。outlet、date`. The story is the article; its items are those
    headlines (読売, 朝日, 共同, NHK, CNN ...) and the Wikinews article itself (headline + lead).

    Kept out: headlines with no Japanese script (the corpus' tokeniser destroyed the spaces of Latin-script
    titles), publishers that are not news outlets (`_NEWS_PUBLISHER`), sources dated more than `JA_SOURCE_WINDOW`
    from the article's median source date, headlines cited by more than one article (their story is ambiguous),
    and articles left with no source.
    """
    raw = subprocess.run(
        ["git", "-C", str(mirror / "tm4roon+jawikinews-headline-dataset" / "repo"), "show",
         "HEAD:raw/cleaned-data.tsv.gz"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    csv.field_size_limit(1 << 30)
    articles = list(
        csv.DictReader(io.StringIO(gzip.decompress(raw).decode("utf-8")), delimiter="\t", quoting=csv.QUOTE_NONE)
    )
    stories: list[tuple[str, str, str, date, list[tuple[str, str, date]]]] = []
    for article in articles:
        sources = []
        for match in _JA_SOURCE.finditer(article["article"]):
            title, outlet = _ja_detokenise(match["title"]), _ja_detokenise(match["outlet"])
            try:
                when = date(int(match["y"]), int(match["m"]), int(match["d"]))
            except ValueError:
                continue
            if _JA_SCRIPT.search(title) and _NEWS_PUBLISHER.search(outlet):
                sources.append((title, outlet, when))
        if not sources:
            continue
        median = date.fromordinal(int(statistics.median(s[2].toordinal() for s in sources)))
        sources = [s for s in sources if abs(s[2] - median) <= JA_SOURCE_WINDOW]
        body = _ja_detokenise(article["article"].split("『", 1)[0])
        lead = "".join(sentence + "。" for sentence in body.split("。")[:LEAD_SENTENCES] if sentence)
        stories.append((article["id"], _ja_detokenise(article["headline"]), lead, median, sources))
    cited_by = Counter(title for *_, sources in stories for title in {s[0] for s in sources})
    rows = []
    for article_id, headline, lead, median, sources in stories:
        if not JA_YEARS[0] <= median.year <= JA_YEARS[1]:
            continue
        kept = list({s[0]: s for s in sources if cited_by[s[0]] == 1}.values())
        if not kept:
            continue  # the article alone is no grouping
        items = [(headline, "ja.wikinews.org", lead, median), *((t, o, "", d) for t, o, d in kept)]
        for number, (title, outlet, text, when) in enumerate(items):
            rows.append(
                {
                    "id": f"jawn-{article_id}-{number}",
                    "story": f"jawn-{article_id}",
                    "outlet": outlet,
                    "title": title,
                    "text": text,
                    "url": f"https://ja.wikinews.example/{article_id}/{number}",
                    "published": datetime.combine(when, datetime.min.time(), JST).isoformat(timespec="seconds"),
                    "language": "ja",
                }
            )
    _write("jawikinews.csv", rows)


# ---- WMT news test sets: one news article and its human translations, one story per article -------------------

WMT_XML = (
    ("wmt-conference+wmt21-news-systems", "xml/newstest2021.ja-en.all.xml"),
    ("wmt-conference+wmt21-news-systems", "xml/newstest2021.en-ja.all.xml"),
    ("wmt-conference+wmt22-news-systems", "xml/wmttest2022.en-zh.all.xml"),
    ("wmt-conference+wmt22-news-systems", "xml/wmttest2022.ja-en.all.xml"),
)
"""Document-level WMT test files with a document id per article (the other CJK pairs' XML is not stored in the
repositories, and their plain-text files carry no document boundaries)."""
WMT_TXT = (("wmt-conference+wmt24-news-systems", ("en-ja", "en-zh", "ja-zh")),)
"""WMT24 keeps one line per paragraph with a metadata line (domain, docid) each; en-ja and en-zh share one English
source, so those articles come in three languages."""


_WMT_SENTENCE_END = re.compile(r"(?<=[。！？▼])|(?<=[.!?])\s+")


def _wmt_outlet(docid: str) -> str:
    """'guardian.306602' -> 'guardian'; 'test-en-news_brisbanetimes.com.au.228963' -> 'brisbanetimes.com.au'."""
    return re.sub(r"^test-[a-z]{2}-news_", "", docid).rsplit(".", 1)[0]


def _wmt_item(
    story: str, number: int, outlet: str, language: str, segments: list[str], *, paragraphs: bool = False
) -> dict[str, str]:
    segments = [" ".join(s.split()) for s in segments if s.strip()]
    if paragraphs:
        # WMT24 keeps paragraphs, and its Japanese articles have no headline line: sentences are what the title
        # (the first) and the lead (the next ones) are made of, as for the sentence-segmented years.
        segments = [s.strip() for line in segments for s in _WMT_SENTENCE_END.split(line) if s.strip()]
    return {
        "id": f"{story}-{number}",
        "story": story,
        "outlet": outlet,
        "title": segments[0] if segments else "",
        "text": " ".join(segments[1 : 1 + LEAD_SENTENCES]),
        "url": f"https://wmt.example/{story}/{language}",
        "published": "",
        "language": language,
    }


def build_wmt_news(mirror: Path) -> None:
    """WMT news test documents (2021, 2022, 2024): each article as its outlet published it (English, Japanese) and
    its professional human translations made for the shared task (Japanese, English, Chinese). The story is the
    article: the source and its translations are one story in two or three languages. Only the news domain; the
    first segment is the headline, the next `LEAD_SENTENCES` its lead (as for the other sets); of two references
    the first (translator A) is kept.

    Translations are an easier proxy than independent reports in two languages (the same facts, names and figures
    in the same order), see README.md.
    """
    rows: list[dict[str, str]] = []
    for repo_name, path in WMT_XML:
        year = re.search(r"20\d\d", path)
        root = ElementTree.fromstring(_git_show(mirror / repo_name / "repo", path))
        for doc in root.iter("doc"):
            if doc.get("domain", "news") != "news":
                continue
            story = f"wmt{year[0] if year else ''}-{doc.get('id')}"
            outlet = _wmt_outlet(doc.get("id", ""))
            source = doc.find("src")
            reference = doc.find("ref")
            if source is None or reference is None:
                continue
            src_lang, ref_lang = source.get("lang", ""), reference.get("lang", "")
            rows.append(_wmt_item(story, 0, outlet, src_lang, [s.text or "" for s in source.iter("seg")]))
            rows.append(
                _wmt_item(story, 1, f"{outlet} ({ref_lang} translation)", ref_lang,
                          [s.text or "" for s in reference.iter("seg")])
            )  # fmt: skip
    for repo_name, pairs in WMT_TXT:
        repo = mirror / repo_name / "repo"
        by_doc: OrderedDict[str, dict[str, list[str]]] = OrderedDict()
        for pair in pairs:
            source_lang, target_lang = pair.split("-")
            metadata = [json.loads(line) for line in _git_show(repo, f"txt/metadata/{pair}.jsonl").splitlines()]
            sources = _git_show(repo, f"txt/sources/{pair}.txt").split("\n")
            references = _git_show(repo, f"txt/references/{pair}.refA.txt").split("\n")
            source_segments: OrderedDict[str, list[str]] = OrderedDict()
            for meta, source_line, reference_line in zip(metadata, sources, references, strict=False):
                if meta.get("domain") == "news":
                    by_doc.setdefault(meta["docid"], {}).setdefault(target_lang, []).append(reference_line)
                    source_segments.setdefault(meta["docid"], []).append(source_line)
            for docid, segments in source_segments.items():
                by_doc[docid].setdefault(source_lang, segments)  # en-ja and en-zh: one English source
        for docid, languages in by_doc.items():
            story = f"wmt2024-{docid}"
            outlet = _wmt_outlet(docid)
            source_lang = docid.split("-")[1]
            ordered = sorted(languages.items(), key=lambda kv: kv[0] != source_lang)  # the original first
            for number, (language, segments) in enumerate(ordered):
                name = outlet if language == source_lang else f"{outlet} ({language} translation)"
                rows.append(_wmt_item(story, number, name, language, segments, paragraphs=True))
    rows = [row for row in rows if row["title"]]
    _write("wmt_news.csv", rows)


def main() -> None:
    mirror = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror")
    build_uci(mirror)
    build_ecbplus(mirror)
    build_jawikinews(mirror)
    build_wmt_news(mirror)


if __name__ == "__main__":
    main()
