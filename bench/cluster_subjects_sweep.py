"""EXPERIMENT (reverted): dev-half sweep of the event-word and date signals in research/dedupe.py.

Run: OPENBLAS_NUM_THREADS=1 uv run python bench/cluster_subjects_sweep.py dev "" "EVENT_WORD_FACTOR=0.5" ...
Each argument sets research.dedupe constants (reset to defaults before each) and prints pooled subject P/R."""
import sys, itertools
sys.path.insert(0, "/work/wt/subjects")
import research.dedupe as d
from bench.cluster_real import load_sets, Counts
from bench.cluster_subjects import subject_batches, run_batch, interval
sets = load_sets(["uci", "ecbplus", "jawikinews"])
half = sys.argv[1]
batches = {s.name: subject_batches(s, s.dev if half == "dev" else s.test) for s in sets}
def score(label):
    row = [label]
    allc = []
    for s in sets:
        c = Counts(); per = []
        for w, m in batches[s.name]:
            pred = run_batch(s, m, topic=w, threshold=None)
            one = Counts(); one.add(pred, [s.labels[i] for i in m]); per.append(one); c.add(pred, [s.labels[i] for i in m])
        allc += per
        idx = s.dev if half == "dev" else s.test
        wh = Counts(); wh.add(run_batch(s, idx, topic=None, threshold=None), [s.labels[i] for i in idx])
        row.append(f"{s.name} P {c.pair_precision:.3f} R {c.pair_recall:.3f} [{c.correct_pairs}/{c.predicted_pairs}/{c.true_pairs}] (whole {wh.pair_precision:.3f}/{wh.pair_recall:.3f})")
    P = sum(c.correct_pairs for c in allc)/sum(c.predicted_pairs for c in allc)
    R = sum(c.correct_pairs for c in allc)/sum(c.true_pairs for c in allc)
    row.append(f"all P {P:.3f} R {R:.3f}")
    print(" | ".join(row), flush=True)
defaults = {k: getattr(d, k) for k in dir(d) if k.isupper()}
for spec in sys.argv[2:]:
    for k, v in defaults.items(): setattr(d, k, v)
    for kv in spec.split(","):
        if not kv: continue
        k, v = kv.split("=")
        setattr(d, k, type(getattr(d, k))(eval(v)))
    score(spec)
