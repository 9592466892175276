"""A large trace of a real capture's shape: the capture's timed events repeated ``copies`` times, each copy shifted
past the last in time, with its flow ids and correlation ids offset so that no two copies share one.

    python bench/tile_trace.py tests/data/real/ddp_v100_rank1.json.gz 40 bench/out/ddp_v100_x40.json

For measuring what perftool holds an event (bench_spill.py --trace) on the mix of events a real profiler writes,
at sizes no capture in the repo reaches.
"""

from __future__ import annotations

import argparse
import gzip
import json

ID_STRIDE = 10**9  # a copy's flow ids are offset by this ...
CORRELATION_STRIDE = 10**8  # ... and its correlation-like args by this
CORRELATIONS = ("correlation", "External id", "Record function id", "Ev Idx")


def _shifted(event: dict, copy: int, span: float) -> dict:
    """``event`` as copy ``copy`` has it."""
    shifted = dict(event, ts=float(event["ts"]) + copy * span)
    if isinstance(event.get("id"), int):
        shifted["id"] = event["id"] + copy * ID_STRIDE
    args = event.get("args")
    if isinstance(args, dict):
        offset = {key: args[key] + copy * CORRELATION_STRIDE for key in CORRELATIONS if isinstance(args.get(key), int)}
        shifted["args"] = args | offset
    return shifted


def tile(source: str, copies: int, out: str) -> None:
    """Write ``copies`` copies of ``source``'s timed events (its metadata once) to ``out``."""
    with gzip.open(source, "rt") if source.endswith(".gz") else open(source) as stream:
        document = json.load(stream)
    events = document.pop("traceEvents")
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    untimed = [e for e in events if not ("ts" in e and e.get("ph") != "M")]
    start = min(float(e["ts"]) for e in timed)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - start + 1000.0
    with open(out, "w") as written:
        written.write(json.dumps(document)[:-1] + (", " if document else "") + '"traceEvents": [')
        rows = (json.dumps(e) for e in untimed)
        tiled = (json.dumps(_shifted(e, copy, span)) for copy in range(copies) for e in timed)
        for n, row in enumerate(item for stream in (rows, tiled) for item in stream):
            written.write(("," if n else "") + row)
        written.write("]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the capture (JSON, or gzip)")
    parser.add_argument("copies", type=int)
    parser.add_argument("out")
    args = parser.parse_args()
    tile(args.source, args.copies, args.out)


if __name__ == "__main__":
    main()
