"""A capture's reports do not depend on the order its file lists the events in: profilers differ in how they
order what they write (by thread, by start, by end), and a trace merged or rewritten by another tool keeps none."""

from __future__ import annotations

import gzip
import json
import random

import pytest
from conftest import DATA


def _rounded(value):
    """``value`` (a JSON document) with its numbers to 9 significant digits: sums added in another order differ in
    the last bits."""
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return float(f"{value:.9g}") if isinstance(value, float) else value


def _reports(run, path) -> dict:
    """``info`` and ``scan`` as JSON, the file's path written as TRACE, numbers to 9 digits, the tracks without the
    numbers perftool gives them (in the order the file first names them)."""
    documents = {}
    for command in ("info", "scan"):
        text = (
            run(command, path, "--format", "json", "--fail-on", "never").stdout
            if command == "scan"
            else (run(command, path, "--format", "json").stdout)
        )
        documents[command] = _rounded(json.loads(text.replace(str(path), "TRACE")))
    for track in documents["info"]["tracks"]:
        del track["id"]
    return documents


@pytest.mark.slow  # about 5 s a capture: six commands on a real trace each
@pytest.mark.parametrize(
    "name",
    [
        "ddp_v100_rank1.json.gz",  # roofline rows of equal time
        "mi300_resnet_actckpt_ddp8_rank0.json.gz",  # ROCm: launch and forward-to-backward flows, 1 ns gaps
        "resnet50_pt18_workers0.json.gz",  # PyTorch 1.8: string thread ids, evidence of equal length
    ],
)
def test_the_reports_of_a_capture_are_the_same_with_its_events_in_another_order(run, tmp_path, name):
    document = json.loads(gzip.open(DATA / "real" / name).read())
    shuffled = tmp_path / name
    random.Random(7).shuffle(document["traceEvents"])
    with gzip.open(shuffled, "wt") as handle:
        json.dump(document, handle)
    assert _reports(run, shuffled) == _reports(run, DATA / "real" / name)
