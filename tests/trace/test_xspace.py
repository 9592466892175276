"""The raw XSpace (``*.xplane.pb``) read natively: the same events as the profiler's own JSON export of it, and every
feature of the exporter's conversion on XSpaces encoded here field by field (the schema of ``xplane.proto``)."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter

import msgspec
import numpy as np
import pytest
from conftest import DATA, error_line
from xspace_synth import event, gpu_capture, line, message, number, plane, space, stat

from perftool.analysis.launches import launch_rows
from perftool.analysis.steps import detect_steps
from perftool.common.errors import TraceError
from perftool.pipeline.read import load_trace
from perftool.trace import xspace
from perftool.trace.kept_args import KeepArgs
from perftool.trace.loader import read_trace
from perftool.trace.model import Phase

XSPACE = DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb"
ITS_JSON = DATA / "real" / "jax08_mi300x_attention_opbyop.trace.json.gz"  # jaxlib's export of it
EVERY_ARG = KeepArgs(names=".")  # every named event keeps its args


def exported(data: bytes, tmp_path) -> tuple[list[dict], dict]:
    """The events :func:`xspace.batches` gives for ``data``, as plain dicts, and the metadata it sets."""
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data)
    metadata: dict = {}
    events = [_plain(e) for batch in xspace.batches(str(path), metadata) for e in batch]
    return events, metadata


def _plain(e) -> dict:
    args = msgspec.json.decode(bytes(e.args)) if bytes(e.args) else None
    times = {k: v for k, v in (("ts", e.ts), ("dur", e.dur)) if not math.isnan(v)}
    return {"ph": e.ph, "pid": e.pid, "tid": e.tid, "name": e.name, **times, "args": args}


@pytest.mark.parametrize("cached", [xspace.CACHED_STATS, 2], ids=["stats cached", "cache cleared as it fills"])
def test_the_real_capture_s_xspace_gives_every_event_of_its_json_export(tmp_path, monkeypatch, cached):
    """jaxlib exported the JSON beside it from this XSpace: the same 4,124 events, names, times, args and threads,
    the allocator's 286 bookkeeping events left out as there; beyond the export, each XLA op's program id."""
    monkeypatch.setattr(xspace, "CACHED_STATS", cached)
    mine, metadata = exported(XSPACE.read_bytes(), tmp_path)
    theirs = [e for e in json.loads(gzip.decompress(ITS_JSON.read_bytes()))["traceEvents"] if e]
    assert len(mine) == len(theirs) == 4124
    with_program = [e for e in mine if xspace.PROGRAM_ID in (e.get("args") or {})]
    assert len(with_program) == 174 and all("hlo_module" in e["args"] for e in with_program)

    def key(e: dict) -> str:
        times = {k: float(e[k]) for k in ("ts", "dur") if k in e}
        args = {k: v for k, v in (e.get("args") or {}).items() if k != xspace.PROGRAM_ID}
        return json.dumps([e["ph"], e["pid"], e.get("tid", 0), e["name"], times, args or None], sort_keys=True)

    assert Counter(map(key, mine)) == Counter(map(key, theirs))
    assert metadata["displayTimeUnit"] == "ns"
    assert metadata["deviceProperties"] == [
        {"id": 0, "name": "AMD Instinct", "numSms": 304, "totalGlobalMem": 206_141_652_992,
         "memoryBandwidth": 2_662_400_000_000}
    ]  # fmt: skip


def test_the_real_xspace_and_its_json_export_give_the_same_verdict(run):
    verdicts = []
    for path in (XSPACE, ITS_JSON):
        result = run("scan", str(path), "--format", "json", "--fail-on", "never")
        assert result.exit_code == 0, result.output
        (scanned,) = json.loads(result.stdout)["traces"]
        verdicts.append([(f["rule_id"], f["severity"], f["message"], f["fix"]["text"]) for f in scanned["findings"]])
    assert verdicts[0] == verdicts[1] and verdicts[0]


def _gpu_space(*extra_planes: bytes, memory: int = 80 << 30) -> bytes:
    host = plane(
        3,
        "/host:CPU",
        lines=[
            line(
                11643246108867846427,
                "python",
                100,
                event(1, 0, 5_000_000),
                event(2, 1_000, 0),
                event(3, 2_000_000, 1_000_000, stat(1, "train"), stat(2, 7)),
                event(4, 3_000_000, 10),
            ),
            line(7, "tf_pjrt_thread_pool/7", 100, event(5, 4_000_000, 2_500_000, stat(3, 1 / 3), stat(4, 5))),
        ],  # fmt: skip
        event_names={
            1: "PjitFunction(step)",
            2: "MemoryAllocation",
            3: ("jit_step", "step", []),
            4: "Steps",
            5: ("cuLaunchKernel", "", [stat(6, 5, ref=True)]),
        },  # fmt: skip
        stat_names={1: "step_name", 2: "_p", 3: "ratio", 4: "correlation_id", 5: "sm90_xmma", 6: "kernel_name"},
    )
    device = plane(
        0,
        "/device:GPU:0",
        lines=[
            line(16, "Stream #16(Kernel)", 200, event(1, 0, 3_000_000, stat(1, 5), stat(2, b"\x01\x02"))),
            line(99, "Async XLA Ops", 200, event(1, 0, 10)),
        ],
        event_names={1: "fusion.1"},
        stat_names={1: "correlation_id", 2: "blob", 3: "device_vendor", 4: "core_count", 5: "memory_size"},
        stats=[stat(3, "Nvidia"), stat(4, 132), stat(5, memory)],
    )
    metadata_plane = plane(4, "/host:metadata", event_names={1: "jit_step(1)"})
    return space(metadata_plane, device, host, *extra_planes)


def test_planes_lines_events_and_stats_are_exported_as_the_profiler_does(tmp_path):
    events, metadata = exported(_gpu_space(), tmp_path)
    named = {(e["name"], e["pid"], e.get("tid")): e["args"] for e in events if e["ph"] == "M"}
    assert named[("process_name", 701, 0)] == {"name": "/host:CPU"}  # the host: past the devices' numbers
    assert named[("process_name", 1, 0)] == {"name": "/device:GPU:0"}  # device plane N: process N + 1
    assert named[("thread_name", 701, 11643246108867846427 & 0xFFFFFFFF)] == {"name": "python"}  # a uint32 thread
    assert named[("thread_sort_index", 701, 7)] == {"sort_index": 2}  # the host's threads in line order
    assert named[("thread_sort_index", 1, 16)] == {"sort_index": 16}  # a device's by id
    assert not any(args == {"name": "/host:metadata"} or args == {"name": "Async XLA Ops"} for args in named.values())
    work = {e["name"]: e for e in events if e["ph"] == "X"}
    assert set(work) == {"PjitFunction(step)", "train", "Steps", "cuLaunchKernel", "fusion.1"}  # no allocator event
    assert work["PjitFunction(step)"]["ts"] == pytest.approx(0.1) and work["PjitFunction(step)"]["dur"] == 5.0
    assert work["PjitFunction(step)"]["args"] is None
    assert work["Steps"]["dur"] == 1e-5  # a duration of 10 ps: 1e-5 µs
    assert work["train"]["args"] == {"long_name": "jit_step", "step_name": "train"}  # named by its step, "_p" left out
    assert work["train"]["ts"] == pytest.approx(2.1)
    assert work["cuLaunchKernel"]["args"] == {"kernel_name": "sm90_xmma", "ratio": "0.333333", "correlation_id": "5"}
    assert work["fusion.1"]["args"] == {"correlation_id": "5", "blob": "<opaque bytes>"}
    assert (work["fusion.1"]["pid"], work["fusion.1"]["tid"], work["fusion.1"]["ts"]) == (1, 16, 0.2)
    assert metadata["deviceProperties"] == [{"id": 0, "name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": 80 << 30}]


def test_an_nvidia_plane_s_units_and_memory_give_the_peaks_of_the_models_they_fit_alike(tmp_path, run):
    """JAX on an H100 records an NVIDIA GPU of 132 SMs and 80 GiB, as an H800 would: the roofline has their peaks,
    which are the same, and a note says why it names both. An H200 and an H200 NVL differ: the note names both."""
    path = tmp_path / "h100.xplane.pb"
    path.write_bytes(_gpu_space())
    shown = json.loads(run("info", str(path), "--format", "json").stdout)
    assert shown["roofline"]["device_spec"] == "H100-SXM5-80GB or H800-SXM5-80GB"
    assert shown["roofline"]["peak_tflops"]["bf16"] == 989.5
    assert (
        'the trace names the device only "NVIDIA GPU": its 132 compute units and 80 GiB of memory fit NVIDIA H100 SXM5'
        " (80 GB) and NVIDIA H800 SXM5 (80 GB) alike, which nothing in the trace tells apart; their peaks and memory"
        " bandwidth are the same, so the roofline uses them, and the fit, which needs one model, a generic device's"
        " figures" in shown["caveats"]
    )
    path.write_bytes(_gpu_space(memory=141 << 30))  # an H200 or an H200 NVL, whose peaks differ: none
    shown = json.loads(run("info", str(path), "--format", "json").stdout)
    assert shown["roofline"]["device_spec"] is None and not any("alike, which" in c for c in shown["caveats"])
    assert (
        "the trace names its device only by its vendor ('NVIDIA GPU'), and its 132 compute units and 141.0 GiB fit"
        " NVIDIA H200 (141 GB) and NVIDIA H200 NVL (141 GB) alike, whose peaks or memory bandwidth differ: no peaks"
        in " ".join(shown["roofline"]["notes"])
    )


def test_a_zero_duration_is_one_picosecond_and_a_negative_id_reads_as_the_int64_it_is(tmp_path):
    data = space(plane(-1, "/device:GPU:0", lines=[line(-2, "Stream #1", 0, event(1, 7, 0))], event_names={1: "k"}))
    events, _ = exported(data, tmp_path)
    (work,) = [e for e in events if e["ph"] == "X"]
    assert (work["pid"], work["tid"], work["ts"], work["dur"]) == (0, (-2) & 0xFFFFFFFF, 7e-6, 1e-6)


def test_tpu_planes_are_the_devices_only_where_no_gpu_plane_is(tmp_path):
    tpu = plane(2, "/device:TPU:2", lines=[line(1, "XLA Ops", 0, event(1, 0, 10))], event_names={1: "fusion"})
    custom = plane(5, "/device:CUSTOM:0", lines=[line(1, "Ops", 0, event(1, 0, 10))], event_names={1: "op"})
    events, _ = exported(space(tpu, custom), tmp_path)
    assert {e["pid"] for e in events if e["ph"] == "X"} == {3}
    events, _ = exported(_gpu_space(tpu), tmp_path)
    assert 3 not in {e["pid"] for e in events}


def test_a_line_s_display_id_and_display_name_are_its_thread(tmp_path):
    named = line(5, "raw", 0, event(1, 0, 10), display_id=9, display="Stream #9(Kernel)")
    data = space(plane(0, "/device:GPU:0", lines=[named], event_names={1: "k"}))
    events, _ = exported(data, tmp_path)
    assert [(e["tid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"] == [(9, "Stream #9(Kernel)")]
    assert [e["tid"] for e in events if e["ph"] == "X"] == [9]


def test_a_tpu_capture_read_from_its_xspace_has_its_ops_as_the_device(tmp_path):
    """A TPU's ops line holds its work: read from the planes as from the JSON export."""
    ops = [event(1, step * 2_000_000_000, 1_500_000_000) for step in range(6)]
    data = space(plane(0, "/device:TPU:0", lines=[line(1, "XLA Ops", 0, *ops), line(2, "XLA Modules", 0, *ops)],
                       event_names={1: "fusion.3"}))  # fmt: skip
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(data)
    trace = load_trace(path)
    assert trace.dialect == "xla" and len(trace) == 12
    assert {t.thread_name: t.role.value for t in trace.tracks}["XLA Ops"] == "device"


def _tpu_plane(chip: int, generation: str | None, name: str = "", hbm_gbps: float | None = None) -> bytes:
    """A TPU's plane running six 1.5 ms ops 2 ms apart, naming its generation as libtpu does (or not at all), with
    the peak FLOP/s it records, and its HBM bandwidth where given."""
    ops = [event(1, step * 2_000_000_000, 1_500_000_000) for step in range(6)]
    hbm = [stat(3, hbm_gbps)] if hbm_gbps else []
    return plane(chip, name or f"/device:TPU:{chip}", lines=[line(1, "XLA Ops", 0, *ops)], event_names={1: "fusion.3"},
                 stat_names={1: "device_type_string", 2: "peak_teraflops_per_second",
                             3: "peak_hbm_bw_gigabytes_per_second"},
                 stats=[stat(2, 197.0), *hbm, *([stat(1, generation)] if generation else [])])  # fmt: skip


@pytest.mark.parametrize(
    ("generations", "spec"),
    [(["TPU v5 lite"] * 2, "TPU-v5e"), (["TPU v4"], "TPU-v4"), (["TPU v4", "TPU v5 lite"], None),
     (["TPU v5 lite", None], None), ([None], None)],
    ids=["two v5e chips", "a v4", "two generations", "one chip unnamed", "none named"],
)  # fmt: skip
def test_a_tpu_s_generation_is_read_from_its_planes(tmp_path, run, generations, spec):
    """Each TPU plane names its chip's generation (the ``device_type_string`` stat jax's JSON export leaves out): the
    roofline has that generation's peaks where every chip names the same one, and none where they differ or one
    names none. A chip's SparseCore plane, which XProf writes even empty, names none and changes nothing."""
    path = tmp_path / "tpu.xplane.pb"
    sparse_core = _tpu_plane(9, None, "/device:TPU:0 SparseCore 0")
    path.write_bytes(space(*(_tpu_plane(chip, generation) for chip, generation in enumerate(generations)), sparse_core))
    _, metadata = exported(path.read_bytes(), tmp_path)
    assert metadata.get("deviceProperties") == ([{"id": 0, "name": generations[0]}] if spec else None)
    shown = json.loads(run("info", str(path), "--format", "json").stdout)
    assert shown["roofline"]["device_spec"] == spec


@pytest.mark.parametrize(
    ("generation", "bandwidths", "spec", "peaks"),
    [("TPU7x", [819.0, 819.0], "TPU7x", ({"bf16": 197.0}, 819.0)),
     ("TPU v5 lite", [819.0], "TPU-v5e", ({"bf16": 197.0}, 819.0)),
     ("TPU7x", [819.0, 820.0], None, None), ("TPU7x", [None], None, None)],
    ids=["a generation the table lacks", "one it has", "chips that record other peaks", "no bandwidth recorded"],
)  # fmt: skip
def test_a_tpu_the_table_lacks_takes_the_peaks_its_planes_record(tmp_path, run, generation, bandwidths, spec, peaks):
    """A newer TPU than the table knows had no roofline though each chip's plane records the peak FLOP/s and HBM
    bandwidth XProf's roofline takes: the roofline takes them where every chip records the same, said to be the
    capture's; a generation the table has keeps its own figures."""
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(space(*(_tpu_plane(chip, generation, hbm_gbps=hbm) for chip, hbm in enumerate(bandwidths))))
    roofline = json.loads(run("info", str(path), "--format", "json").stdout)["roofline"]
    assert roofline["device_spec"] == spec
    if peaks is not None:
        assert (roofline["peak_tflops"], roofline["memory_bandwidth_gbps"]) == peaks
    text = " ".join(run("info", str(path)).stdout.replace("│", " ").split())  # the roofline table's cell, unwrapped
    assert ("TPU7x (the peaks its capture records): peak TFLOP/s bf16 197 · memory 819 GB/s" in text) == (
        spec == "TPU7x"
    )


def _gpu_line(body: bytes) -> bytes:
    """An XSpace of one GPU plane whose one line holds ``body`` after its id and name."""
    return space(plane(0, "/device:GPU:0", lines=[number(1, 16) + message(2, "Stream #16") + body],
                       event_names={1: "k"}))  # fmt: skip


_FOREIGN = "not an XSpace protobuf: its bytes break off or make no sense at byte "
_CUT_SHORT = "an XSpace cut short: it ends at byte "


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x0a\xff\xff", f"{_CUT_SHORT}3, inside a number"),  # a plane whose length goes on past the file
        (b"\x0a\x7f\x01", f"{_CUT_SHORT}3, inside a field that starts at byte 2 and runs to byte 129"),  # its bytes
        (b"\x0f\x00", _FOREIGN),  # wire type 7, which protobuf has not
        (_gpu_line(b"\x22\x05\x08"), _FOREIGN),  # an event whose length runs past its line (not the file)
        (_gpu_line(message(4, number(1, 1) + b"\x10\xff")) + b"\x01", _FOREIGN),  # a number that runs past its event
        (
            message(
                1,
                number(1, 0)
                + message(2, "/device:GPU:0")
                + message(3, number(1, 16) + message(4, b"\x08\x01\x10\x90")),
            ),
            _CUT_SHORT,
        ),  # a number cut off by the end of the file (its last event's last bytes)
        (_gpu_line(message(4, b"\x08\x01\x33")), _FOREIGN),  # an event's field of wire type 3 (a group, long gone)
        (b"\x00\x01" + _gpu_line(message(4, number(1, 1))), _FOREIGN),  # a field numbered 0, which no field is
        (_gpu_line(b"\x00\x01"), _FOREIGN),  # a line's
        (_gpu_line(message(4, b"\x08\x01\x00\x01")), _FOREIGN),  # an event's
        (b'{"traceEvents": []}', _FOREIGN),  # JSON named .xplane.pb
    ],
    ids=[
        "plane's length past the end",
        "plane past the end",
        "no such wire type",
        "event past its line",
        "number past its event",
        "cut number",
        "group",
        "field 0",
        "line field 0",
        "event field 0",
        "json",
    ],  # fmt: skip
)
def test_a_truncated_or_foreign_xspace_is_one_line_naming_the_byte(tmp_path, run, data, says):
    """A file cut short says so, with the byte where it ends and what it ends inside; bytes that are no XSpace name
    the byte where that showed."""
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data)
    result = run("info", str(path))
    error_line(result, str(path), says)
    assert "Traceback" not in result.output


def test_a_number_that_runs_past_its_event_is_named_at_the_event_s_end(tmp_path, run):
    """The duration's last byte says more follows: read on, it takes the next event's tag; the error names the byte
    where the event ended, not one further on."""
    first, second = message(4, number(1, 1) + b"\x18\x81"), message(4, number(1, 1) + number(3, 5))
    data = _gpu_line(first + second)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data)
    end_of_first = data.index(first) + len(first)
    error_line(run("info", str(path)), f"make no sense at byte {end_of_first:,} ")


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled readers", "Python readers"])
def test_a_stat_broken_inside_is_named_at_its_byte_in_the_file(tmp_path, run, monkeypatch, compiled):
    """A stat whose own bytes break the schema (a field numbered 0 after its name), in the second event of a line:
    the error names the byte in the file where the stat breaks off, whichever reader read the line."""
    if not compiled:
        monkeypatch.setattr(xspace, "_compiled_line_events", None)
        monkeypatch.setattr(xspace, "_compiled_stat_value", None)
    broken = number(1, 1) + b"\x00\x01"
    data = _gpu_line(message(4, number(1, 1)) + message(4, number(1, 1) + message(4, broken)))
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data)
    with pytest.raises(TraceError, match=f"make no sense at byte {data.rindex(broken) + len(number(1, 1)) + 1:,} "):
        read_trace(str(path), workers=1)


def test_the_real_xspace_cut_anywhere_is_refused_in_one_line_or_read(tmp_path, run):
    """Cut at any of a spread of places, the file is refused in one line naming a byte, or (cut between planes)
    read as the planes it still holds: never a traceback."""
    data = XSPACE.read_bytes()
    for cut in range(1, len(data), len(data) // 23):
        path = tmp_path / f"cut{cut}.xplane.pb"
        path.write_bytes(data[:cut])
        result = run("info", str(path), "--format", "json")
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 2:
            assert f"{_CUT_SHORT}{cut:,}, inside " in result.output or "no events" in result.output, result.output
            assert len(result.output.strip().splitlines()) == 1


def test_an_empty_xspace_file_is_one_line(tmp_path, run):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"")
    error_line(run("info", str(path)), str(path), "empty file")


def test_a_jitted_gpu_step_read_from_its_xspace_pairs_each_launch_with_its_kernel(tmp_path):
    """Launch and kernel share a correlation id in their stats (XLA's traces have no flows): each of the 320
    launches finds its kernel, and the host's repeated jitted call makes the 8 steps."""
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(gpu_capture(8))
    trace = load_trace(path)
    sources, spans = launch_rows(trace)
    assert len(sources) == 320 and {trace.names[n] for n in trace.name[spans].tolist()} == {
        "loop_add_fusion", "input_reduce_fusion", "custom-call.1", "loop_multiply_fusion"}  # fmt: skip
    assert detect_steps(trace).count == 8


def test_a_launch_and_its_kernel_carry_their_correlation_id_as_read_and_pair_as_their_args_say(monkeypatch):
    """The real capture's launches and kernels: each one's correlation id (its ``correlation_id`` stat) is its flow
    id as the decoding processes read it, so no args are read to pair them; the pairs are those the args give."""
    trace = load_trace(str(XSPACE))
    complete = np.flatnonzero(trace.phase == Phase.COMPLETE)
    said = {row: msgspec.json.decode(trace.kept_args[ref]).get("correlation_id")
            for row, ref in zip(complete.tolist(), trace.args_ref[complete].tolist()) if ref >= 0}  # fmt: skip
    linked = {row: int(value) for row, value in said.items() if value is not None}
    assert len(linked) > 200 and all(trace.flow_id[row] == value for row, value in linked.items())
    assert all(trace.flow_id[row] == -1 for row in set(complete.tolist()) - set(linked))
    pairs = launch_rows(trace)
    trace.flow_id[complete] = -1  # as a trace that names them in its args alone
    trace.times_moved()
    assert pairs[0].size == 105 and all(np.array_equal(a, b) for a, b in zip(pairs, launch_rows(trace)))


@pytest.mark.parametrize(
    ("value", "read"), [("12", 12), ("007", 7), ("9" * 18, int("9" * 18)), ("9" * 19, None), ("-3", None), ("", None),
                        ("x1", None), (None, None)],
)  # fmt: skip
def test_a_correlation_id_is_a_tracer_s_counter_or_none(value, read):
    assert xspace._correlation(value) == read


def _columns(trace) -> dict:
    names = [trace.names[n] for n in trace.name.tolist()]
    tracks = [(trace.tracks[t].process_name, trace.tracks[t].thread_name) for t in trace.track.tolist()]
    args = [bytes(trace.kept_args[r]) if r >= 0 else b"" for r in trace.args_ref.tolist()]
    return {"names": names, "tracks": tracks, "ts": trace.ts.tolist(), "dur": trace.dur.tolist(), "args": args}


def test_an_xspace_cut_into_runs_of_events_reads_the_same_in_worker_processes(tmp_path, monkeypatch):
    """Each line cut between its events into runs of about 300 bytes, decoded by two processes: the same events, in
    the same order, with the same args, as one process reading each line whole."""
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(gpu_capture(8))
    whole = _columns(read_trace(str(path), workers=1, keep_args=EVERY_ARG))
    monkeypatch.setattr(xspace, "PIECE_BYTES", 300)
    tasks = xspace.layout(str(path), {}).tasks
    assert len(tasks) > 20 and all(0 < task.size < 300 + 128 for task in tasks)
    cut = _columns(read_trace(str(path), workers=2, keep_args=EVERY_ARG))
    assert cut == whole and len(whole["names"]) == 8 + 320 + 320  # jitted calls, launches, kernels


def test_a_broken_run_decoded_in_a_worker_process_is_one_line_naming_its_byte(tmp_path, monkeypatch):
    """A stat cut short in the last run of a line, found by a decoding process: the same error as in this one."""
    good = gpu_capture(8)
    broken_at = good.rindex(b"jit_step") - 1  # the length of the last kernel's module name: made to run past its stat
    data = good[:broken_at] + b"\x7f" + good[broken_at + 1 :]
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(data)
    monkeypatch.setattr(xspace, "PIECE_BYTES", 300)
    messages = []
    for workers in (1, 2):
        with pytest.raises(TraceError) as raised:
            read_trace(str(path), workers=workers)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "not an XSpace protobuf" in messages[0] and str(path) in messages[0]


def test_short_lines_are_decoded_together_in_order(tmp_path, monkeypatch):
    """A host of 60 threads, each line a few hundred bytes: lines gathered into tasks of about 1 KB (fewer tasks
    than lines, none past the size but by its last line), read by two processes as one process reads them."""
    lines = [line(n + 1, f"thread {n}", 0, *[event(1, k * 1000, 500, stat(1, n * 100 + k)) for k in range(12)])
             for n in range(60)]  # fmt: skip
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(space(plane(1, "/host:CPU", lines=lines, event_names={1: "PjitFunction(step)"},
                                 stat_names={1: "correlation_id"})))  # fmt: skip
    whole = _columns(read_trace(str(path), workers=1, keep_args=EVERY_ARG))
    monkeypatch.setattr(xspace, "PIECE_BYTES", 1000)
    tasks = xspace.layout(str(path), {}).tasks
    assert 10 < len(tasks) < 60 and all(len(task.runs) > 1 for task in tasks[:-1])
    assert [line for task in tasks for line, _ in task.runs] == list(range(60))
    assert _columns(read_trace(str(path), workers=2, keep_args=EVERY_ARG)) == whole and len(whole["ts"]) == 720
