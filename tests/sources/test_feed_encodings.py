"""Feeds in legacy encodings decode as a feed reader would: HTTP charset first, the declaration next, detection last.

The feeds are small news feeds written for these tests in Russian, Chinese, Japanese and Korean, encoded the
way sites still serve them (KOI8-R, GB2312, Shift_JIS, EUC-JP, EUC-KR); each is fetched through `FeedSource`
from the fake server, so the response's real `Content-Type` header is what the parser sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sources.base import SearchQuery
from sources.charsets import Charset, choose_charset
from sources.config import SourcesConfig
from sources.feeds import read_feed
from sources.http import HttpClient
from sources.rss import FeedSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse


@dataclass(frozen=True)
class Sample:
    encoding: str
    """As sites label it."""
    channel: str
    entries: tuple[tuple[str, str], ...]
    """(title, description) pairs."""

    def xml(self, *, declare: bool) -> bytes:
        prolog = f'<?xml version="1.0" encoding="{self.encoding}"?>' if declare else '<?xml version="1.0"?>'
        items = "".join(
            f"<item><title>{title}</title><link>https://news.example/{n}</link>"
            f"<description>{text}</description><pubDate>Mon, 0{n + 1} Mar 2027 08:00:00 GMT</pubDate></item>"
            for n, (title, text) in enumerate(self.entries)
        )
        document = (
            f'{prolog}\n<rss version="2.0"><channel><title>{self.channel}</title>'
            f"<link>https://news.example/</link>{items}</channel></rss>"
        )
        return document.encode(self.encoding)


SAMPLES = [
    Sample(
        "KOI8-R",
        "Новости технологий",
        (
            ("Вышло новое ядро Linux с поддержкой свежих процессоров", "Разработчики ускорили файловые системы."),
            ("Открытая модель обошла конкурентов в тестах", "Компания опубликовала веса под свободной лицензией."),
            ("В Москве прошла конференция по машинному обучению", "Исследователи показали новые результаты."),
        ),
    ),
    Sample(
        "GB2312",
        "科技新闻",
        (
            ("深度求索发布新一代开源大模型", "该模型在多项基准测试中表现优异，并以开源许可证发布。"),
            ("国产芯片企业宣布量产新款处理器", "新处理器采用先进制程，能效比大幅提升。"),
            ("北京举办人工智能产业大会", "来自各地的企业展示了最新的应用成果。"),
        ),
    ),
    Sample(
        "Shift_JIS",
        "テクノロジーニュース",
        (
            ("新しいオープンソースの言語モデルが公開", "研究チームはモデルの重みを自由なライセンスで公開しました。"),
            ("東京で人工知能の国際会議が開催", "世界中の研究者が集まり、最新の成果を発表しました。"),
            ("国内メーカーが新型の半導体を発表", "省電力の設計で、来年から量産を始める予定です。"),
        ),
    ),
    Sample(
        "EUC-JP",
        "科学ニュース",
        (
            ("大学の研究所が新しい観測装置を完成", "宇宙からの微弱な信号を捉えることができるといいます。"),
            ("気象庁が今年の夏の見通しを発表", "全国的に平年より暑くなる見込みです。"),
        ),
    ),
    Sample(
        "EUC-KR",
        "기술 뉴스",
        (
            ("새로운 오픈 소스 언어 모델 공개", "연구팀은 모델 가중치를 자유 라이선스로 공개했다고 밝혔습니다."),
            ("서울에서 인공지능 국제 학회 개최", "전 세계 연구자들이 모여 최신 성과를 발표했습니다."),
            ("국내 기업이 새로운 반도체를 발표", "전력 효율이 크게 향상되었다고 회사는 설명했습니다."),
        ),
    ),
]
IDS = [sample.encoding for sample in SAMPLES]


def _titles(content: bytes, content_type: str | None) -> tuple[str | None, list[tuple[str, str]]]:
    parsed = read_feed(content, feed_url="https://news.example/feed.xml", content_type=content_type)
    return parsed.title, [(entry.title, entry.text) for entry in parsed.entries]


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_declared_in_the_document(sample: Sample) -> None:
    assert _titles(sample.xml(declare=True), "application/rss+xml") == (sample.channel, list(sample.entries))


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_declared_nowhere_is_detected(sample: Sample) -> None:
    content = sample.xml(declare=False)

    assert choose_charset(content, content_type="application/rss+xml").origin == "detected"
    assert _titles(content, "application/rss+xml") == (sample.channel, list(sample.entries))


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_charset_only_in_the_http_header(sample: Sample) -> None:
    content = sample.xml(declare=False)
    content_type = f"text/xml; charset={sample.encoding}"

    assert choose_charset(content, content_type=content_type).origin == "http"
    assert _titles(content, content_type) == (sample.channel, list(sample.entries))


def test_the_http_charset_wins_over_the_declaration() -> None:
    # Both decode any byte, so only the order decides: the bytes are windows-1251, the document says KOI8-R.
    text = "Новости"
    content = (
        f'<?xml version="1.0" encoding="KOI8-R"?><rss version="2.0"><channel><title>{text}</title>'.encode(
            "windows-1251"
        )
        + b"<link>https://news.example/</link></channel></rss>"
    )

    title, _ = _titles(content, "application/rss+xml; charset=windows-1251")

    assert title == text


def test_a_wrong_http_charset_is_passed_over() -> None:
    # The server says UTF-8 (a common default) but the feed is KOI8-R as it declares: the declaration decodes it.
    sample = SAMPLES[0]

    assert _titles(sample.xml(declare=True), "application/xml; charset=utf-8") == (sample.channel, list(sample.entries))


def test_gb2312_label_reads_gbk_characters() -> None:
    # "镕" is GBK but not GB2312; feeds labelled GB2312 use such characters, and browsers read them as GB18030.
    text = "朱镕基讲话"
    content = (
        f'<?xml version="1.0" encoding="gb2312"?><rss version="2.0"><channel><title>{text}</title>'.encode("gbk")
        + b"<link>https://news.example/</link></channel></rss>"
    )

    assert _titles(content, None)[0] == text


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
async def test_through_the_feed_source(sample: Sample, fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    # Header-only charset on one feed, nothing at all on the other: both come out right through the real client.
    content = sample.xml(declare=False)
    header = {"Content-Type": f"text/xml; charset={sample.encoding}"}
    fake_server.route("GET", "/header.xml", FakeResponse(body=content, headers=header))
    fake_server.route("GET", "/bare.xml", FakeResponse(body=content, content_type="application/rss+xml"))
    config = SourcesConfig(allow_private_urls=True)

    for path in ("/header.xml", "/bare.xml"):
        source = FeedSource(client=http_client, config=config, feed_url=fake_server.url + path)
        batch = await source.search(SearchQuery(text=""))
        assert sorted((item.title, item.text) for item in batch.items) == sorted(sample.entries), path


# UTF-16 and UTF-32 with no byte-order mark: the XML specification (appendix F) tells them by how `<?xml` is spelt
# in the first four bytes. Cases shaped like feedparser's tests/encoding/{u16,utf-16le,utf-32be-autodetect}.xml
# (BSD-2-Clause), with an item added so there is something to read.
WIDE = ["utf-16-be", "utf-16-le", "utf-32-be", "utf-32-le"]


@pytest.mark.parametrize("codec", WIDE)
@pytest.mark.parametrize("declared", ["utf-16", "utf-16le", "utf-32", None])
def test_utf16_and_utf32_without_a_byte_order_mark(codec: str, declared: str | None) -> None:
    prolog = f'<?xml version="1.0" encoding="{declared}"?>' if declared else '<?xml version="1.0"?>'
    sample = SAMPLES[0]
    content = (
        f'{prolog}\n<!--\nDescription:  Wellformed UTF-16 (autodetected)\n-->\n<rss version="2.0"><channel>'
        f"<title>{sample.channel}</title><link>https://news.example/</link><item><title>{sample.entries[0][0]}</title>"
        "<link>https://news.example/0</link></item></channel></rss>"
    ).encode(codec)
    assert not content.startswith((b"\xfe\xff", b"\xff\xfe", b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00"))

    # What a server that knows nothing of the file says (feedparser's harness too): text/xml, no charset.
    assert _titles(content, "text/xml") == (sample.channel, [(sample.entries[0][0], "")])
    assert choose_charset(content, content_type="application/xml; charset=utf-8") == Charset(codec, "wide")
