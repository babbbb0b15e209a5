"""Tests of the research steps: collect, dedupe, rank, iterate, export."""
