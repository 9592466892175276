"""The folder SGLang profiles a job into, as it writes it: each rank's trace, the merge of them
(``--merge-profiles``), each stage's captures apart (``--profile-by-stage``)."""

from __future__ import annotations

import gzip
import html
import json

import pytest
from builders import SGLANG_PROFILE_ID, sglang_merged, sglang_profile, sglang_rank

from perftool.job.ranks import rank_from_name


def _shown(run, job, fmt: str) -> str:
    """The scan of ``job`` in ``fmt`` as a reader sees it: markup unescaped, whitespace as one space, in lower case
    (Markdown and HTML begin each note as a sentence)."""
    shown = run("scan", job, "--format", fmt, "--workers", "1", "--fail-on", "never")
    return " ".join(html.unescape(shown.stdout).split()).lower()


def test_a_merged_profile_beside_its_ranks_traces_is_left_out_of_the_job_view(run, tmp_path):
    """SGLang writes merged-{id}.trace.json.gz into the folder of the ranks' own traces: as a rank it claimed rank 0
    (its distributedInfo) beside rank 0's own trace, with rank 1's figures."""
    job = sglang_profile(tmp_path / "job", merged=True)
    merged = str(job / f"merged-{SGLANG_PROFILE_ID}.trace.json.gz")
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert document["unread"] == [] and merged not in [t["path"] for t in document["traces"]]
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1]
    assert document["job"]["merged_traces"] == [merged] and document["job"]["earlier_captures"] == []
    said = "1 trace merging the ranks' traces into one file left out (the view reads each rank's own trace"
    for fmt in ("text", "markdown", "html"):
        assert said in _shown(run, job, fmt), fmt


def test_merged_profiles_alone_are_no_job_and_each_is_reported(run, tmp_path):
    job = sglang_profile(tmp_path / "job", merged=True)
    for rank in (0, 1):
        (job / f"{SGLANG_PROFILE_ID}-TP-{rank}.trace.json.gz").unlink()
    again = sglang_merged({0: sglang_rank(0, 300.0), 1: sglang_rank(1, 200.0)})
    (job / "merged-1764000999.5.trace.json.gz").write_bytes(gzip.compress(json.dumps(again).encode()))
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert document["job"] is None
    assert sorted(t["merged_ranks"][0] for t in document["traces"]) == ["TP00", "TP01"]
    assert [t["rank"] for t in document["traces"]] == [None, None]  # not the number in the name: the time


@pytest.mark.parametrize("stages", [("EXTEND", "DECODE"), ("prefill", "decode")])
def test_the_stages_of_a_profile_by_stage_are_named_as_stages(run, tmp_path, stages):
    """--profile-by-stage writes each rank's prefill (EXTEND; with SGLANG_PROFILE_V2, prefill) and decode captures
    apart: the view compares the later stage's, and says the other stage's are left out as a stage, to be viewed
    together, not as earlier cycles."""
    job = sglang_profile(tmp_path / "job", stages=stages)
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert [row["path"].endswith(f"-{stages[1]}.trace.json.gz") for row in document["job"]["ranks"]] == [True, True]
    assert all(path.endswith(f"-{stages[0]}.trace.json.gz") for path in document["job"]["earlier_captures"])
    said = (
        f"the view compares the ranks' {stages[1].lower()} captures (sglang's --profile-by-stage writes each stage "
        f"apart); their {stages[0].lower()} captures left out (scan them together for that stage's view):"
    )
    for fmt in ("text", "markdown", "html"):
        assert said in _shown(run, job, fmt), fmt


@pytest.mark.parametrize(
    ("earlier", "ranks"),
    [
        ("1763999999.5-TP-{rank}-DECODE", (0, 1)),
        ("1763999999.5-TP-{rank}", (0, 1)),
        ("1763999999.5-TP-{rank}-DECODE", (0,)),
    ],
)
def test_earlier_captures_of_the_same_stage_or_of_none_are_earlier_captures(run, tmp_path, earlier, ranks):
    """A profile of one stage before another of the same stage, or of no stage, is an earlier capture as any other;
    so are earlier captures of two stages."""
    job = sglang_profile(tmp_path / "job", stages=("EXTEND", "DECODE"))
    for rank in ranks:
        before = job / f"{SGLANG_PROFILE_ID}-TP-{rank}-EXTEND.trace.json.gz"
        before.rename(job / f"{earlier.format(rank=rank)}.trace.json.gz")
    shown = _shown(run, job, "text")
    assert "the view compares each rank's latest capture; 2 earlier captures left out" in shown
    assert "stage" not in shown


def test_ranks_viewed_in_different_stages_name_no_stage(run, tmp_path):
    """A rank whose decode capture is missing is viewed in its prefill: the view's ranks are of no one stage."""
    job = sglang_profile(tmp_path / "job", stages=("EXTEND", "DECODE"))
    (job / f"{SGLANG_PROFILE_ID}-TP-1-DECODE.trace.json.gz").unlink()
    shown = _shown(run, job, "text")
    assert "the view compares each rank's latest capture; 1 earlier capture left out" in shown
    assert "stage" not in shown


def test_a_rank_s_place_in_sglang_s_name_is_its_rank_where_the_trace_does_not_say(run, tmp_path):
    """Without distributedInfo the ranks were the profile's id (the time: 1764000000), one rank captured twice."""
    job = sglang_profile(tmp_path / "job")
    for rank in (0, 1):
        path = job / f"{SGLANG_PROFILE_ID}-TP-{rank}.trace.json.gz"
        trace = json.loads(gzip.decompress(path.read_bytes()))
        del trace["distributedInfo"]
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1]


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("1764000000.123-TP-3.trace.json.gz", 3),
        ("1764000000.123-TP-3-DECODE.trace.json.gz", 3),
        ("myrun-1764000000.123-TP-3-prefill.trace.json.gz", 3),  # SGLANG_PROFILE_V2: a prefix, the stage in lower case
        ("rpd-1764000000.5-TP-0.trace.json.gz", 0),
        ("1764000000.123-TP-3-DP-1.trace.json.gz", None),  # the data-parallel size is not in the name
        ("1764000000.123-TP-1-PP-1-EP-2-EXTEND.trace.json.gz", None),
    ],
)
def test_the_rank_sglang_s_file_name_gives(name, rank):
    assert rank_from_name(name) == rank
