"""Jobs of many ranks: one trace per rank, each reduced where it lies to a small summary, and the job
view (per-rank table, clock alignment, waits in collectives, stragglers, imbalance) built from the
summaries alone. Rank analysis runs on Dask (:mod:`perftool.job.cluster`)."""
