"""``perftool gate``: decide whether a candidate trace regressed against a baseline, or broke a budget."""
