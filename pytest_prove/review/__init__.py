"""The read side: two stored runs in, one result object out (pairing, labels, not run / new /
left out, the comparison, the gate); also the cost of runs, step endings, fix-check's cases
and the tallies of one run.  Pytest-free and renderer-free: it imports only the store, the
declaration and the statistics."""
