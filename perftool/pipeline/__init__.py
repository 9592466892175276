"""A trace's way through perftool, stage by stage: read (:mod:`.read`: the file, its dialect), what info reports
of it (:mod:`.info`), and its scan (:mod:`.scan`: analysed, detected, predicted, its findings)."""
