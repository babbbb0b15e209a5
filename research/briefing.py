"""A briefing: the digests of several topics since the last one, merged into one cited read.

Guarantees: each topic keeps its own developments (newest run first, at most `MAX_DEVELOPMENTS` per topic); a story
told under two topics appears once, under the first topic that reported it, with the other topic named next to it.
A story is what the runs' own de-duplication put in one cluster (all outlets' articles about one event), and the same
canonical URL is the same story everywhere, so clusters of two topics that share an article are one story; citations
are numbered once across the briefing, with one list of sources.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from research.digest import (
    CITATION,
    MAX_DEVELOPMENTS,
    CitedItem,
    Development,
    Digest,
    link_target,
    link_text,
    with_citations,
)
from research.markup import escape_markdown
from sources import canonical_url

__all__ = ["Briefing", "BriefingSection", "TopicDigests", "assemble_briefing", "render_briefing_markdown"]


@dataclass(frozen=True, kw_only=True)
class TopicDigests:
    """One topic of a briefing: its monitor's digests since the last briefing, newest first, and the stories its
    runs found (each the URLs of the items one run clustered together), for recognising one story under two
    topics."""

    topic: str
    monitor_id: int
    digests: Sequence[Digest]
    stories: Sequence[Sequence[str]] = ()
    failed: bool = False
    """Every run since the last briefing failed (the topic is listed as not checked)."""


class BriefingSection(BaseModel):
    """One topic with news: its lead headline and developments, citing the briefing's numbered sources."""

    topic: str
    monitor_id: int
    headline: str
    developments: list[Development] = Field(default_factory=list)
    also_under: list[str] = Field(default_factory=list)
    """Topics whose stories were already told here (they are left out there)."""
    origins: list[tuple[int, int]] = Field(default_factory=list)
    """Where each development (numbered 1.. in the section, in this order) comes from: the index of its digest among
    the topic's `TopicDigests.digests` and its index among that digest's developments (what feedback on story n of
    the section names)."""


class Briefing(BaseModel):
    """Several topics' news in one message."""

    headline: str
    sections: list[BriefingSection] = Field(default_factory=list)
    quiet_topics: list[str] = Field(default_factory=list)
    """Topics that ran and found nothing new (or whose news was all told under another topic)."""
    failed_topics: list[str] = Field(default_factory=list)
    cited: list[CitedItem] = Field(default_factory=list)
    """Every source the sections cite, numbered across the briefing."""

    @property
    def has_news(self) -> bool:
        return bool(self.sections)


@dataclass
class _Numbering:
    cited: list[CitedItem] = field(default_factory=list)
    by_url: dict[str, int] = field(default_factory=dict)

    def number(self, cited: CitedItem) -> int:
        key = canonical_url(cited.url)
        if key not in self.by_url:
            self.by_url[key] = len(self.cited) + 1
            self.cited.append(cited.model_copy(update={"number": self.by_url[key]}))
        return self.by_url[key]


def _story_of_urls(topics: Sequence[TopicDigests]) -> dict[str, str]:
    """Canonical URL → its story: URLs that one run clustered together are one story, and a URL in two clusters
    (two topics, or two runs) joins them (union-find)."""
    parent: dict[str, str] = {}

    def find(url: str) -> str:
        parent.setdefault(url, url)
        while parent[url] != url:
            parent[url] = parent[parent[url]]
            url = parent[url]
        return url

    for topic in topics:
        for story in topic.stories:
            keys = [canonical_url(url) for url in story]
            for key in keys[1:]:
                parent[find(key)] = find(keys[0])
    return {url: find(url) for url in list(parent)}


def assemble_briefing(topics: Sequence[TopicDigests], *, max_per_topic: int = MAX_DEVELOPMENTS) -> Briefing:
    """The briefing of these topics (in the order given): see the module docstring."""
    story_of_url = _story_of_urls(topics)
    told: dict[str, int] = {}
    """Each story told so far → the index of the section that told it."""
    numbering = _Numbering()
    sections: list[BriefingSection] = []
    quiet: list[str] = []
    failed: list[str] = []
    for topic in topics:
        section = BriefingSection(topic=topic.topic, monitor_id=topic.monitor_id, headline="")
        repeated_elsewhere: set[int] = set()
        for digest_index, digest in enumerate(topic.digests):
            by_number = {source.number: source for source in digest.cited}
            for development_index, development in enumerate(digest.developments):
                if len(section.developments) >= max_per_topic:
                    break
                sources = [by_number[n] for n in development.citations if n in by_number]
                stories = {story_of_url.get(canonical_url(s.url), canonical_url(s.url)) for s in sources}
                earlier = [told[story] for story in stories if story in told]
                if earlier:
                    if earlier[0] != len(sections):  # told under another topic: name this one there
                        repeated_elsewhere.add(earlier[0])
                    continue
                if not section.developments and development is digest.developments[0]:
                    section.headline = digest.headline  # its lead story is told here, so its headline fits
                numbers = [numbering.number(source) for source in sources]
                text = _renumbered(development.text, {s.number: n for s, n in zip(sources, numbers, strict=True)})
                section.developments.append(Development(text=text, citations=numbers or development.citations))
                section.origins.append((digest_index, development_index))
                for story in stories:
                    told.setdefault(story, len(sections))
        for index in sorted(repeated_elsewhere):
            if topic.topic not in sections[index].also_under:
                sections[index].also_under.append(topic.topic)
        if section.developments:
            sections.append(section)
        elif topic.failed:
            failed.append(topic.topic)
        else:
            quiet.append(topic.topic)
    return Briefing(
        headline=_headline(sections, quiet, failed),
        sections=sections,
        quiet_topics=quiet,
        failed_topics=failed,
        cited=numbering.cited,
    )


def _renumbered(text: str, numbers: dict[int, int]) -> str:
    """The development's inline `[n]` citations in the briefing's numbering (unknown numbers dropped)."""

    def replace(match: re.Match[str]) -> str:
        mapped = [numbers[int(part)] for part in match.group(1).split(",") if int(part) in numbers]
        return "".join(f"[{n}]" for n in dict.fromkeys(mapped))

    return CITATION.sub(replace, text).strip()


def _headline(sections: Sequence[BriefingSection], quiet: Sequence[str], failed: Sequence[str]) -> str:
    if not sections:
        parts = ["Nothing new"]
    else:
        lead = sections[0]
        parts = [f"{lead.topic}: {lead.headline}" if lead.headline else lead.topic]
        if len(sections) > 1:
            others = ", ".join(section.topic for section in sections[1:])
            parts.append(f"also news on {others}")
    if quiet and sections:
        parts.append(f"nothing new on {', '.join(quiet)}")
    if failed:
        parts.append(f"not checked: {', '.join(failed)}")
    return " · ".join(parts)


def render_briefing_markdown(briefing: Briefing, *, title: str) -> str:
    """The briefing as platform-neutral markdown: `title`, the headline, a section per topic, then the topics with
    nothing new in one line and the numbered sources. Topics and the digests' sentences are plain text, escaped
    like a digest's (`title` is markdown already); only the `[n]` citations become links."""
    esc = escape_markdown
    parts = [f"**{title}**\n{esc(briefing.headline)}"]
    for section in briefing.sections:
        lines = [f"**{esc(section.topic)}** · monitor #{section.monitor_id}"]
        if section.headline:
            lines.append(f"_{esc(section.headline)}_")
        lines += [f"{i}. {with_citations(esc(d.text), d.citations)}" for i, d in enumerate(section.developments, 1)]
        if section.also_under:
            lines.append(f"_Also under {esc(', '.join(section.also_under))}._")
        parts.append("\n".join(lines))
    if briefing.quiet_topics:
        parts.append(f"**Nothing new:** {esc(', '.join(briefing.quiet_topics))}.")
    if briefing.failed_topics:
        parts.append(f"**Could not check:** {esc(', '.join(briefing.failed_topics))} (their sources failed).")
    if briefing.cited:
        sources = [
            f"[{c.number}] [{link_text(c.title)}]({link_target(c.url)}) — {esc(c.source)}" for c in briefing.cited
        ]
        parts.append("**Sources**\n" + "\n".join(sources))
    return "\n\n".join(parts) + "\n"
