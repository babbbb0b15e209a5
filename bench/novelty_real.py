"""Novelty across runs on real dated labelled news: what a daily monitor sends again, and what new it silences.

A monitor is simulated over a labelled set's days, one run at the end of each day, calling
`research.novelty.assess_novelty` exactly as the pipeline's novelty stage does with what `monitors.runner` gives
it in a real run:
- the items published in the run's look-back window (one day, or seven with `--lookback 7`), after the pipeline's
  `exact_unique`;
- `delivered_items` / `delivered_urls`: the items the runs of the last `MonitorSettings.story_memory_days` (or of
  the look-back, if longer) and the previous run delivered (text and URL); `--delivered-days 0`: the previous run's
  only, what the runner once gave novelty;
- `already_delivered`: the ids every run of the last `MonitorSettings.novelty_memory_days` delivered;
- `previous_digest`: none (its citations are the previous run's top delivered items, already given as
  `delivered_items`, title only: they add nothing a lexical run can tell from the items themselves).
A run delivers every item it calls `new` or `update` (`PipelineResult.new_item_ids`, what the runner marks
delivered).

Per set and half (stories split like bench/cluster_real.py, by a hash of the label), with the label standing for
one event (jawikinews: one Wikinews article; uci: one Google News story):
- re-sends: reported items whose label an earlier run delivered, by status (the "again tomorrow" error);
- events sent more than once: labels reported by two or more runs, out of the labels reported;
- missed: labels that were never reported although their items were collected, all of them called
  `repeat`/`delivered`; and developments: labels first seen in a run where some of their items fall in a story
  delivered before (a later event of a delivered affair), and how many of those reached the user;
- for each day, the agreement of that day's stories between the one-day and the seven-day look-back (pair F1 of
  one clustering against the other over the day's items) — with `--lookback both`;
- CPU time per run of `assess_novelty`.
`--sweep` scores the development rule's parameters (`research.novelty.DEVELOPMENT_SHARE`,
`NEW_FIGURE_IS_DEVELOPMENT`) on the dev halves only.

Run: uv run python bench/novelty_real.py [--sets jawikinews,uci] [--lookback 1|7|both] [--sweep]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster_real import Counts, LabelledSet, load_sets
from monitors.views import MonitorSettings
from research import novelty
from research.novelty import assess_novelty
from research.pipeline import exact_unique
from sources.base import Item

MEMORY_DAYS = MonitorSettings.novelty_memory_days
STORY_MEMORY_DAYS: int = getattr(MonitorSettings, "story_memory_days", 0)
"""What the runner hands novelty whole: the delivered items of the last days (0 in a tree before the setting)."""
SWEEP_SHARES = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
"""`DEVELOPMENT_SHARE` values tried on dev: 0.0 reports every item of a delivered story, 1.01 none."""


@dataclass
class Simulation:
    """What one simulated monitor did over one half of a set."""

    runs: int = 0
    reported: int = 0
    resent: Counter[str] = field(default_factory=Counter)
    """Reported items whose label an earlier run delivered, by status."""
    statuses: Counter[str] = field(default_factory=Counter)
    runs_of_label: Counter[str] = field(default_factory=Counter)
    """Runs that reported each label."""
    seen_labels: set[str] = field(default_factory=set)
    developments: set[str] = field(default_factory=set)
    """Labels whose first run put some of their items in a story delivered before."""
    seconds: list[float] = field(default_factory=list)
    stories_by_period: dict[datetime, dict[str, str]] = field(default_factory=dict)
    """Each run's items published since the run before, and the story that run put them in."""

    @property
    def reported_labels(self) -> set[str]:
        return set(self.runs_of_label)

    @property
    def missed(self) -> set[str]:
        return self.seen_labels - self.reported_labels


def _with_outlet_url(item: Item) -> Item:
    """The item with a URL on its outlet's own host when the set gives a placeholder one (jawikinews' items all sit
    on ja.wikinews.example): `research.reputation.outlet_of` reads the outlet from the host, as in a real run."""
    if urlsplit(item.url).hostname != "ja.wikinews.example":
        return item
    host = "o" + hashlib.sha1(item.source.encode()).hexdigest()[:12] + ".example"
    return item.model_copy(update={"url": f"https://{host}{urlsplit(item.url).path}"})


def simulate(
    labelled: LabelledSet,
    indices: Sequence[int],
    *,
    lookback: timedelta,
    period: timedelta = timedelta(days=1),
    delivered_days: int = 0,
) -> Simulation:
    """One run every `period`, each looking back `lookback`. The next run is given, whole, the items delivered by
    the runs of the last `delivered_days` (or of the look-back, if longer) and by the previous run, as
    `monitors.runner` does; `delivered_days=0`: the previous run's only (the runner's older rule)."""
    dated = [i for i in indices if labelled.items[i].published is not None]
    items = [_with_outlet_url(labelled.items[i]) for i in dated]
    label_of = {labelled.items[i].id: labelled.labels[i] for i in dated}
    items.sort(key=lambda it: (it.published, it.id))
    published = [it.published for it in items if it.published is not None]
    first, last = published[0], published[-1]
    end = first.replace(hour=0, minute=0, second=0, microsecond=0) + period
    sim = Simulation()
    delivered_on: dict[str, datetime] = {}
    delivered_item: dict[str, Item] = {}
    delivered_labels: set[str] = set()
    previous: list[Item] = []
    last_digest: list[Item] = []
    while end - period <= last:
        window = items[bisect_left(published, end - lookback) : bisect_left(published, end)]
        if not window:
            end += period
            continue
        already = {item_id for item_id, on in delivered_on.items() if on >= end - timedelta(days=MEMORY_DAYS)}
        unique = exact_unique(window)
        started = time.process_time()
        result = assess_novelty(
            unique,
            delivered_items=previous,
            already_delivered=frozenset(already),
            delivered_urls=frozenset(item.url for item in previous),
        )
        sim.seconds.append(time.process_time() - started)
        sim.runs += 1
        reported = [item for item in result.items if result.status[item.id] in ("new", "update")]
        sim.statuses.update(
            f"{status} ({'old' if label_of[item_id] in delivered_labels else 'new'} label)"
            for item_id, status in result.status.items()
        )
        sim.reported += len(reported)
        for item in reported:
            if label_of[item.id] in delivered_labels:
                sim.resent[result.status[item.id]] += 1
        # Stories that held something delivered before this run: a label first seen in one of them is a development.
        delivered_before = set(already) | {item.id for item in previous}
        known_stories = {result.deduper.cluster_id(item_id) for item_id in delivered_before} - {None}
        for item in result.items:
            label = label_of[item.id]
            first_seen = label not in sim.seen_labels and label not in delivered_labels
            if first_seen and result.cluster_of[item.id] in known_stories:
                sim.developments.add(label)
        sim.seen_labels.update(label_of[item.id] for item in result.items)
        run_labels = {label_of[item.id] for item in reported}
        sim.runs_of_label.update(run_labels)
        delivered_labels |= run_labels
        for item in reported:
            delivered_on.setdefault(item.id, end)
            delivered_item[item.id] = item
        sim.stories_by_period[end] = {
            item.id: result.cluster_of[item.id]
            for item in result.items
            if item.published is not None and item.published >= end - period
        }
        if reported:  # a run that reports nothing sends no digest: the runner's previous run stays the one before
            last_digest = reported
        if delivered_days:
            recent = end + period - max(timedelta(days=delivered_days), lookback)  # as the next run asks
            given = {item.id for item in last_digest} | {i for i, on in delivered_on.items() if on >= recent}
            previous = sorted((delivered_item[i] for i in given), key=lambda it: (it.published, it.id))
        else:
            previous = last_digest
        end += period
    return sim


def agreement(one: Simulation, other: Simulation) -> Counts:
    """Pair agreement of each day's stories between two simulations (the first taken as the labels)."""
    counts = Counts()
    for end, stories in one.stories_by_period.items():
        theirs = other.stories_by_period.get(end, {})
        ids = [item_id for item_id in stories if item_id in theirs]
        counts.add([theirs[i] for i in ids], [stories[i] for i in ids])
    return counts


def row(name: str, sim: Simulation) -> str:
    reported_labels = sim.reported_labels
    twice = sum(1 for n in sim.runs_of_label.values() if n >= 2)
    developments = sim.developments
    reached = len(developments & reported_labels)
    resent = sum(sim.resent.values())
    ms = [seconds * 1000 for seconds in sim.seconds]
    return (
        f"| {name} | {sim.runs} | {sim.reported} | {resent} ({sim.resent['new']} new, {sim.resent['update']} update) "
        f"| {twice} / {len(reported_labels)} | {len(sim.missed)} / {len(sim.seen_labels)} "
        f"| {reached} / {len(developments)} | {statistics.mean(ms):.0f} / {max(ms):.0f} |"
    )


HEADER = (
    "| set / half / look-back | runs | reported items | re-sent items | events sent 2+ times / reported "
    "| events missed / seen | developments reaching the user | ms per run (mean / max) |\n"
    "|---|---|---|---|---|---|---|---|"
)


@dataclass(frozen=True)
class Setup:
    """How the simulated monitor runs: every `period`, looking back one period (`short`) or seven days (`long`)."""

    period: timedelta
    delivered_days: int

    def run(self, labelled: LabelledSet, indices: Sequence[int], lookback: str) -> Simulation:
        window = self.period if lookback == "short" else timedelta(days=7)
        return simulate(labelled, indices, lookback=window, period=self.period, delivered_days=self.delivered_days)

    def name(self, lookback: str) -> str:
        hours = (self.period if lookback == "short" else timedelta(days=7)).total_seconds() / 3600
        return f"{hours / 24:g} d" if hours >= 24 else f"{hours:g} h"


def report(sets: Sequence[LabelledSet], setup: Setup, lookbacks: Sequence[str], halves: Sequence[str]) -> None:
    print(HEADER)
    for labelled in sets:
        for half in halves:
            indices = labelled.dev if half == "dev" else labelled.test
            sims = {lookback: setup.run(labelled, indices, lookback) for lookback in lookbacks}
            for lookback, sim in sims.items():
                print(row(f"{labelled.name} / {half} / {setup.name(lookback)}", sim))
                statuses = ", ".join(f"{k} {v}" for k, v in sorted(sim.statuses.items()))
                print(f"|   statuses: {statuses} | | | | | | | |")
            if len(sims) == 2:
                counts = agreement(sims["short"], sims["long"])
                print(
                    f"|   {labelled.name} / {half}: each run's own period's stories, {setup.name('short')} vs "
                    f"{setup.name('long')} look-back: pair P {counts.pair_precision:.3f} R {counts.pair_recall:.3f} "
                    f"F1 {counts.pair_f1:.3f} ({counts.items} items) | | | | | | | |"
                )


def sweep(sets: Sequence[LabelledSet], setup: Setup, lookbacks: Sequence[str]) -> None:
    """The rule's two parameters over the dev halves only: re-sent items / developments reaching the user / events
    missed, per set and look-back."""
    print("\nDev halves: re-sent items / developments reaching the user / events missed")
    for figures in (False, True):
        for share in SWEEP_SHARES:
            novelty.DEVELOPMENT_SHARE = share
            novelty.NEW_FIGURE_IS_DEVELOPMENT = figures
            cells = []
            for labelled in sets:
                for lookback in lookbacks:
                    sim = setup.run(labelled, labelled.dev, lookback)
                    developments = sim.developments
                    cells.append(
                        f"{labelled.name} {setup.name(lookback)}: {sum(sim.resent.values())} / "
                        f"{len(developments & sim.reported_labels)} of {len(developments)} / {len(sim.missed)}"
                    )
            print(f"  new figure {'on ' if figures else 'off'}, share {share:.2f}: " + "; ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="jawikinews,uci")
    parser.add_argument("--lookback", default="both", choices=("short", "long", "both"))
    parser.add_argument("--period-hours", type=float, default=24.0, help="time between runs (the short look-back)")
    parser.add_argument("--halves", default="dev,test")
    parser.add_argument(
        "--delivered-days",
        type=int,
        default=STORY_MEMORY_DAYS,
        help="days of delivered items the next run gets whole (0: the previous run's only); default: the runner's",
    )
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    sets = load_sets(args.sets.split(","))
    lookbacks = ("short", "long") if args.lookback == "both" else (args.lookback,)
    setup = Setup(period=timedelta(hours=args.period_hours), delivered_days=args.delivered_days)
    if args.sweep:
        if not hasattr(novelty, "DEVELOPMENT_SHARE"):
            raise SystemExit("this tree's research.novelty has no development rule to sweep")
        sweep(sets, setup, lookbacks)
        return
    report(sets, setup, lookbacks, args.halves.split(","))


if __name__ == "__main__":
    main()
