"""Novelty: which collected items are new for a monitor, which update a story it delivered, which repeat one.

A story is what `research.dedupe.Deduper` makes of the collected items together with what was delivered before, so
novelty uses the clustering's story identity: another outlet's (or another language's) copy of a delivered story
is a repeat, and only an item that says something the story's delivered items did not (a development) reaches the
user again, as an update. What "says something new" means is weighed with the Deduper's own term weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from research.dedupe import Deduper, Fingerprint, VectorLookup
from research.digest import Digest
from sources import Item, canonical_url, item_id

ItemStatus = Literal["new", "update", "repeat", "delivered"]
"""`new`: an item of a story not delivered before (reported). `update`: a new item of a delivered story that brings
a development, something none of the story's delivered items in its language said: a figure they did not quote, or
at least `DEVELOPMENT_SHARE` of its term weight in words they did not use (reported, titled "Update: ").
`repeat`: a new item of a delivered story that brings none, whatever its outlet, or that is in a language none of
the story's delivered items is in (not reported). `delivered`: delivered before (by id or URL; not reported)."""

DEVELOPMENT_SHARE = 0.7
"""The share of an item's term weight (the Deduper's weights: rare words weigh most) that must be in words no
delivered item of its story used for the item to be an update: lower, other outlets' rewordings of a delivered
story come back the next day as updates (`bench/novelty_real.py`)."""
NEW_FIGURE_IS_DEVELOPMENT = True
"""A figure (count, amount; years excepted) that no delivered item of the story quoted makes an item an update: a
new death toll or price is news even in a headline that otherwise repeats the story."""


@dataclass
class Novelty:
    """The collected items after novelty: each one's status and story, and the stories known before."""

    items: list[Item]
    """Unique collected items (new ones and those delivered before), in the order found."""
    status: dict[str, ItemStatus]
    cluster_of: dict[str, str]
    deduper: Deduper

    def told_before(self) -> dict[str, tuple[Item, ...]]:
        """Per story that gained a report in this run (an update or a repeat), its reports delivered before: what
        an alert counting outlets counts besides the run's own (a story keeps growing across runs)."""
        growing = {self.cluster_of[item] for item, status in self.status.items() if status in ("update", "repeat")}
        if not growing:
            return {}
        return {
            story.id: tuple(item for item in story.members if self.status.get(item.id, "delivered") == "delivered")
            for story in self.deduper.clusters
            if story.id in growing
        }


def delivered_references(delivered_items: Sequence[Item], previous_digest: Digest | None) -> list[Item]:
    """What was delivered before, as items: the given ones, then the previous digest's citations."""
    references = list(delivered_items)
    for cited in previous_digest.cited if previous_digest else ():
        canonical = canonical_url(cited.url)
        references.append(
            Item(id=item_id(cited.source or "cited", canonical=canonical), source=cited.source or "cited",
                 url=canonical, title=cited.title)
        )  # fmt: skip
    return references


def assess_novelty(
    items: Sequence[Item],
    *,
    delivered_items: Sequence[Item] = (),
    previous_digest: Digest | None = None,
    already_delivered: Iterable[str] = (),
    delivered_urls: Iterable[str] = (),
    topic: str | None = None,
    vectors: VectorLookup | None = None,
) -> Novelty:
    """Cluster the items together with what was delivered before, and give each item its status.

    `topic`: what the monitor collects for (its words tell no story apart). `vectors`: embedding vectors by item
    id, for the delivered items too, so a delivered story told again in another language is a repeat, not news.
    """
    deduper = Deduper(topic=topic, vectors=vectors)
    references = delivered_references(delivered_items, previous_digest)
    deduper.add(references)
    reference_by_url = {canonical_url(r.url): r.id for r in references}
    delivered_ids = set(already_delivered) | {r.id for r in references}
    delivered_urls = {canonical_url(url) for url in delivered_urls} | set(reference_by_url)
    added = deduper.add(items)

    kept: list[Item] = []
    cluster_of: dict[str, str] = {}
    status: dict[str, ItemStatus] = {}
    emitted: set[str] = set()
    new_ids = {item.id for item in added.new}
    for item in items:
        key = canonical_url(item.url)
        if item.id in emitted or key in emitted:
            continue  # a repeat within this run's collection
        if item.id in new_ids:
            cluster = added.cluster_of[item.id]
        else:  # seen before: it matched something delivered, by id or by URL
            cluster = deduper.cluster_id(item.id) or deduper.cluster_id(reference_by_url.get(key, "")) or ""
        emitted.update((item.id, key))
        kept.append(item)
        cluster_of[item.id] = cluster
        delivered = item.id in delivered_ids or key in delivered_urls or item.id not in new_ids
        status[item.id] = "delivered" if delivered else "new"

    # A story delivered before stays quiet unless an item says what none of its delivered items said.
    told_before: dict[str, dict[str | None, set[str]]] = {}
    """Per delivered story, the terms its delivered items used, by language."""
    for story in deduper.clusters:
        for member in story.members:
            if member.id in delivered_ids or canonical_url(member.url) in delivered_urls:
                found, weights = _terms(deduper, member)
                told_before.setdefault(story.id, {}).setdefault(found.language, set()).update(weights)
    for item in kept:
        told = told_before.get(cluster_of[item.id])
        if status[item.id] == "new" and told is not None:
            status[item.id] = "update" if _development(deduper, item, told) else "repeat"
    return Novelty(items=kept, status=status, cluster_of=cluster_of, deduper=deduper)


def _terms(deduper: Deduper, item: Item) -> tuple[Fingerprint, dict[str, float]]:
    """The item's fingerprint and its terms weighed as the Deduper weighs them when it compares items (every item
    here was added to it: the delivered members of a story and the new items filed under one)."""
    found = deduper.fingerprint_of(item.id)
    return found, deduper.term_weights(found)


def _development(deduper: Deduper, item: Item, told: dict[str | None, set[str]]) -> bool:
    """Whether the item says something the story's delivered items (`told`: their terms by language) did not."""
    found, weights = _terms(deduper, item)
    before = told.get(found.language)
    total = sum(weights.values())
    if before is None or not total:
        return False  # another language's copy (words cannot be compared across languages), or nothing telling
    untold = {term: weight for term, weight in weights.items() if term not in before}
    if NEW_FIGURE_IS_DEVELOPMENT and not found.figures.isdisjoint(untold):
        return True
    return sum(untold.values()) >= DEVELOPMENT_SHARE * total
