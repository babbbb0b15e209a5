"""The page's template on its own: what a feed can put in a title or URL stays text, and only web URLs become links."""

from __future__ import annotations

from datetime import UTC, datetime

from monitors.document import (
    DigestDocument,
    DocumentCited,
    DocumentDevelopment,
    DocumentItem,
    DocumentMonitor,
    DocumentNovelty,
    DocumentRun,
    DocumentStory,
)
from monitors.pages import render_page

PAGE = "https://lookout.example.org/digests/abc"


def _item(url: str, title: str) -> DocumentItem:
    return DocumentItem(id=url, title=title, url=url, source="rss", published_at=None, language=None, relevance=None,
                        credibility=None, score=None, rank=1, delivered=True)  # fmt: skip


def test_only_web_urls_become_links_and_text_stays_text() -> None:
    document = DigestDocument(
        monitor=DocumentMonitor(id=1, topic="<i>topic</i>"),
        run=DocumentRun(id=1, scheduled_for=datetime(2026, 11, 20, tzinfo=UTC), finished_at=None),
        headline="Headline",
        markdown="",
        developments=[DocumentDevelopment(text="A thing [1] and [2, 9].", citations=[1, 2])],
        disputed=[],
        cited=[
            DocumentCited(number=1, title='one" onmouseover="x', url="javascript:alert(1)", source="rss"),
            DocumentCited(number=2, title="two", url="https://example.com/2", source="rss"),
        ],
        tone=None,
        quality=None,
        without_model=None,
        failed_sources=[],
        novelty=DocumentNovelty(items=2, new_items=2, nothing_new=False, changes_since_last=None),
        stories=[
            DocumentStory(
                cluster_id="c",
                rank=1,
                score=None,
                relevance=None,
                credibility=None,
                items=[_item("javascript:alert(2)", "bad <script>x</script>"), _item("https://example.com/ok", "good")],
            )
        ],
        files=[],
        page_url=PAGE,
    )
    html = render_page(document, page_url=PAGE)

    assert "javascript:" not in html.split("</style>", 1)[1].replace("&#34;", "")
    assert "<i>topic</i>" not in html and "&lt;i&gt;topic&lt;/i&gt;" in html
    assert "bad &lt;script&gt;x&lt;/script&gt;" in html and "<script>" not in html
    # [1]'s URL is not a web URL: the number stays text; [2] links its report; [9] cites nothing and stays text
    assert 'A thing [1] and [<a href="https://example.com/2" title="two" rel="noreferrer noopener">2</a>, 9].' in html
    assert '<a href="https://example.com/ok" rel="noreferrer noopener">good</a>' in html
    assert "<img" not in html  # no chart file, no image
