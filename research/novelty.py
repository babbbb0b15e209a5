"""Novelty: which collected items are new for a monitor, which update a story it delivered, which repeat one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from research.dedupe import Deduper, VectorLookup
from research.digest import Digest
from research.reputation import outlet_of
from sources import Item, canonical_url, item_id

ItemStatus = Literal["new", "update", "repeat", "delivered"]
"""`new`: a story not delivered before. `update`: a new item of a delivered story from an outlet that had not
carried it. `repeat`: a new item of a delivered story adding no outlet (not reported). `delivered`: delivered
before (by id or URL)."""


@dataclass
class Novelty:
    """The collected items after novelty: each one's status and story, and the stories known before."""

    items: list[Item]
    """Unique collected items (new ones and those delivered before), in the order found."""
    status: dict[str, ItemStatus]
    cluster_of: dict[str, str]
    deduper: Deduper


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

    # A story delivered before stays quiet unless an outlet that had not carried it now does.
    outlets_before: dict[str, set[str]] = {}
    for story in deduper.clusters:
        for member in story.members:
            if member.id in delivered_ids or canonical_url(member.url) in delivered_urls:
                outlets_before.setdefault(story.id, set()).add(outlet_of(member))
    for item in kept:
        known = outlets_before.get(cluster_of[item.id])
        if status[item.id] == "new" and known is not None:
            status[item.id] = "repeat" if outlet_of(item) in known else "update"
    return Novelty(items=kept, status=status, cluster_of=cluster_of, deduper=deduper)
