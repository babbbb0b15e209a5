"""Research steps: plan queries, collect, de-duplicate and cluster, rank, critique, synthesize, export."""
