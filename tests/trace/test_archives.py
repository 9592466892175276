"""A file sent in place of a trace (an archive, a compressed file perftool does not open, another profiler's report)
is refused in one line that says what it is and how to get the trace out of it, not as JSON that does not parse."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import pickle
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import DATA, REPO, error_line

from perftool.trace.archives import trace_kind

TRACE = DATA / "real" / "rocm_mi250_minitoy.json.gz"
NPU_OUTPUT = DATA / "real" / "torch_npu_db_l2_job" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
DB = NPU_OUTPUT / "ascend_pytorch_profiler_0.db"  # torch_npu's db export


def _zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(TRACE, "trace.json.gz")


def _tar(mode: str):
    def write(path: Path) -> None:
        with tarfile.open(path, mode) as archive:
            archive.add(TRACE, "profile/trace.json.gz")

    return write


def _bytes(data: bytes):
    return lambda path: path.write_bytes(data)


JSON = gzip.decompress(TRACE.read_bytes())
TABLE = (  # torch.profiler's summary, as prof.key_averages().table() prints it
    b"-------------------  ------------  ------------  ------------  ------------  ------------\n"
    b"               Name    Self CPU %      Self CPU   CPU total %     CPU total    # of Calls\n"
    b"-------------------  ------------  ------------  ------------  ------------  ------------\n"
    b"       aten::matmul         0.32%      26.649us        83.69%       6.959ms             1\n"
)
STACKS = (  # torch.profiler's export_stacks, as it writes them (with_stack=True, the experimental config verbose)
    b"st.py(4):_<module> 3\nst.py(4):_<module>;torch/profiler/profiler.py(1204):___enter__ 5\n"
)
FILES = {
    "trace.zip": (_zip, "a zip archive, not a trace: extract it (unzip {path})"),
    "profile.tar": (_tar("w"), "a tar archive, not a trace: extract it (tar -xf {path})"),
    "profile.tar.gz": (_tar("w:gz"), "a gzip'd tar archive, not a trace: extract it (tar -xzf {path})"),
    "trace.json.bz2": (_bytes(bz2.compress(JSON)), "a bzip2-compressed file, not a trace: decompress it (bunzip2"),
    "trace.json.xz": (_bytes(lzma.compress(JSON)), "an xz-compressed file, not a trace: decompress it (unxz"),
    "trace.json.zst": (_bytes(b"\x28\xb5\x2f\xfd" + JSON[:64]), "a zstd-compressed file, not a trace"),
    "trace.7z": (_bytes(b"7z\xbc\xaf\x27\x1c" + bytes(32)), "a 7-Zip archive, not a trace: extract it (7z x"),
    "profile.nsys-rep": (_bytes(bytes(64)), "an Nsight Systems report, which perftool does not read"),
    "results.pftrace": (  # a TracePacket (field 1, length-delimited), as Perfetto's protobuf traces begin
        _bytes(b"\x0a\x12\x08\x01" + bytes(32)),
        "a Perfetto protobuf trace, which perftool does not read (it reads JSON traces): profile the job",
    ),
    "summary.txt": (_bytes(TABLE), "a text table, not a trace (torch.profiler's summary, prof.key_averages().table()"),
    "summary.json.gz": (_bytes(gzip.compress(TABLE)), "a text table, not a trace (torch.profiler's summary"),
    "stacks.txt": (_bytes(STACKS), "folded stacks, not a trace (torch.profiler's prof.export_stacks writes them"),
    "profile.ncu-rep": (_bytes(bytes(64)), "an Nsight Compute report (kernels' counters, no timeline), not a trace"),
    "my_snapshot.pickle": (  # torch.cuda.memory._dump_snapshot's, a pickle of protocol 4
        _bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4)),
        "a Python pickle, not a trace (torch.cuda.memory._dump_snapshot writes the allocator's history as one",
    ),
    "healthy.yaml": (  # a sample's emulator config, which sits beside its trace
        _bytes((REPO / "sample_traces" / "npu" / "healthy.yaml").read_bytes()),
        "an emulator config, not a trace: perftool emulate runs it, and with --trace FILE writes the trace of its run",
    ),
    "tune.yaml": (_bytes((REPO / "examples" / "tune" / "gpu.yaml").read_bytes()), "an emulator config, not a trace"),
    "config.json": (  # the same config written as JSON (a tune config made by a script)
        _bytes(json.dumps(yaml.safe_load((REPO / "examples" / "tune" / "gpu.yaml").read_text())).encode()),
        "an emulator config, not a trace",
    ),
    "device.json": (_bytes(b'{"device": "gpu"}'), "not a trace: a JSON object without a 'traceEvents' array"),
    "device.log": (_bytes(b"device: cuda:0\nstep 1 loss 2.3\n"), "text, not a JSON trace: it begins 'device: cuda:0'"),
    "jit_train_step(12).hlo_proto.pb": (  # XProf's HloProto of a program: its HloModuleProto, field 1
        _bytes(b"\x0a\x10\x0a\x0ejit_train_step"),
        "one XLA program's HLO (an HloProto, which XProf writes per program), not a trace: scan the run's "
        "HOST.xplane.pb, which holds its programs' HLO with their timeline",
    ),
    "node-1.cluster.local.overview_page.pb": (  # a host named with dots, as a machine's full name is
        _bytes(b"\x0a\x02\x08\x01"),
        "XProf's overview page (overview_page.pb), made from a run's XSpace, not a trace: scan the "
        "node-1.cluster.local.xplane.pb beside it",
    ),
    "saved_model.pb": (
        _bytes(b"\x08\x01"),
        "a protobuf file, not a trace perftool reads: of protobufs it reads an XSpace, named HOST.xplane.pb",
    ),
    "module_0001.jit_step.gpu_after_optimizations.txt": (  # XLA_FLAGS=--xla_dump_to's HLO text
        _bytes(b"HloModule jit_step, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n\nENTRY main.3 {\n}\n"),
        "an XLA program's HLO as text (XLA_FLAGS=--xla_dump_to writes them), not a JSON trace: it begins "
        "'HloModule jit_step",
    ),
    "kernel_details.csv": (  # torch_npu's, its first line as it writes it
        _bytes(b"Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"),
        "a CSV table, not a trace: profilers write their summaries as tables beside the trace",
    ),
}


@pytest.mark.parametrize("command", ["scan", "info", "diff"])
@pytest.mark.parametrize("name", list(FILES))
def test_a_file_in_place_of_a_trace_says_how_to_get_the_trace(run, tmp_path, name, command):
    path = tmp_path / name
    write, said = FILES[name]
    write(path)
    paths = [path, path] if command == "diff" else [path]
    error_line(run(command, *paths), f"{path}: {said.format(path=path)}")


def test_a_path_to_quote_is_quoted_in_the_command_given(run, tmp_path):
    path = tmp_path / "my trace.zip"
    _zip(path)
    error_line(run("scan", path), f"extract it (unzip '{path}')")


def test_a_json_trace_named_as_perfetto_s_is_read_as_a_trace(run, tmp_path):
    path = tmp_path / "trace.pftrace"
    path.write_bytes(JSON)
    assert run("info", path).exit_code == 0


def test_a_trace_named_as_a_table_is_read_as_a_trace(run, tmp_path):
    """The name alone makes no table: a file named .csv that holds a JSON trace is read."""
    path = tmp_path / "trace.csv"
    path.write_bytes(b"  " + JSON)
    assert run("info", path).exit_code == 0


def test_a_gzip_d_trace_is_read_as_before(run, tmp_path):
    """A gzip stream whose content is no tar archive is a trace's (the JSON decides)."""
    result = run("info", TRACE)
    assert result.exit_code == 0 and "kineto trace" in result.output
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b"not json"))
    error_line(run("info", broken), "text, not a JSON trace: it begins 'not json'")
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(gzip.compress(JSON)[:100])
    assert "tar" not in error_line(run("info", truncated))


def _device_properties_first(path: Path) -> None:
    """A Kineto trace as PyTorch writes it: its devices' properties (kilobytes on a node of 8 GPUs) before its
    events."""
    device = {
        "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
        "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 233472, "numSms": 132, "sharedMemPerBlockOptin": 232448,
    }  # fmt: skip
    devices = [{"id": i, **device} for i in range(8)]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": devices, "traceEvents": []}, indent=2))


TRACE_KINDS = {
    "trace.json.gz": (lambda path: path.write_bytes(TRACE.read_bytes()), "a gzip'd JSON trace"),
    "trace.json": (_bytes(JSON), "a JSON trace"),
    "devices_first.json": (_device_properties_first, "a JSON trace"),
    "events.json": (_bytes(b'[{"name": "k", "ph": "X", "ts": 1, "dur": 2, "pid": 0, "tid": 0}]'), "a JSON trace"),
    "profiler.db": (lambda path: path.write_bytes(DB.read_bytes()), "a database export of a trace"),
    "host.xplane.pb": (_bytes(b"\x0a\x05hello"), "an XSpace trace"),
    "config.yaml": (_bytes(b"device: npu\nworkload: {}\n"), None),
    "config.json": (_bytes(b'{"device": "npu", "workload": {}, "knobs": {"loop_size": 1}}'), None),
    "numbers.json": (_bytes(b"[1, 2, 3]"), None),
    "notes.txt.gz": (_bytes(gzip.compress(b"traceEvents, said in words")), None),
}


@pytest.mark.parametrize("name", list(TRACE_KINDS))
def test_the_kind_of_trace_a_file_is(tmp_path, name):
    path = tmp_path / name
    write, kind = TRACE_KINDS[name]
    write(path)
    assert trace_kind(str(path)) == kind


def test_a_file_that_cannot_be_read_is_no_kind_of_trace(tmp_path):
    assert trace_kind(str(tmp_path / "missing.json")) is None
    assert trace_kind(str(tmp_path)) is None  # a directory
