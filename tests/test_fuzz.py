"""Property-based and fuzz tests: whatever the input, perftool gives a result or one clear line with exit 2.

Each property feeds random or mutated inputs (truncations, byte flips, wrong types, missing and unknown
keys, extreme numbers, NaN and Infinity, negative durations, unpaired B/E events, duplicate keys,
non-UTF-8 bytes, huge strings) to the trace loader, the rule loader, the config loaders and gate's
inputs, through the command line as a user runs it. The profiles are conftest's: ``quick`` (the default suite,
about 220 examples in all), ``ci`` (``--all``, a few thousand) and ``long`` (``HYPOTHESIS_PROFILE=long python -m
pytest tests/test_fuzz.py``: 5,000 per property, fresh each time).
"""

from __future__ import annotations

import copy
import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import DATA, REPO, error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perftool import api
from perftool.cli.main import cli
from perftool.common.errors import PerftoolError
from perftool.dialects.hlo import Programs
from perftool.emulator.config import EmulatorConfig, load_config
from perftool.rules.model import fill, template_fields
from perftool.trace import xspace
from perftool.tune.spec import TuneConfig, load_tune_config

pytestmark = pytest.mark.fuzz  # CI runs these again at the ci profile: pytest --all -m "slow or fuzz"

SAMPLE = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"
XSPACE = DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb"  # a real capture's raw XSpace
EXAMPLES = {name: REPO / "examples" / "tune" / f"{name}.yaml" for name in ("npu", "ipu", "hpu", "gpu")}
RULE = REPO / "rules" / "PT001-host-bound-gaps.yaml"


def invoke(*args: object) -> Any:
    """Run perftool and check the contract: exit 0 or 1 with no exception, or exit 2 with one line naming ``where``."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    assert [str(w.message) for w in warned] == []  # numpy overflow or invalid-value warnings: numbers it cannot take
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.stderr)
    return result


def assert_clean(result: Any, where: str) -> None:
    if result.exit_code == 2:
        error_line(result, where)


# --- inputs ---------------------------------------------------------------------------------------------------------

EXTREME_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 1e308, -1e308, 5e-324]),
)
STRINGS = st.one_of(st.text(max_size=20), st.sampled_from(["", "x" * 100_000, "64MB", "1e999", "nan", "\u0000", "🚀"]))
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    EXTREME_NUMBERS,
    STRINGS,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def mutate_tree(data: st.DataObject, tree: Any, mutations: int = 3) -> Any:
    """The tree with a few random changes: values replaced by anything, keys dropped, unknown keys added."""
    tree = copy.deepcopy(tree)
    for _ in range(data.draw(st.integers(1, mutations))):
        paths = list(_paths(tree))
        path = data.draw(st.sampled_from(paths))
        parent = _get(tree, path[:-1]) if path else None
        action = data.draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if not path:
            tree = data.draw(ANY_VALUE)
        elif action == "replace":
            parent[path[-1]] = data.draw(ANY_VALUE)
        elif action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(min_size=1, max_size=8))] = data.draw(ANY_VALUE)
    return tree


def _paths(tree: Any, path: tuple = ()) -> Any:
    yield path
    children = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, child in children:
        yield from _paths(child, (*path, key))


def _get(tree: Any, path: tuple) -> Any:
    for key in path:
        tree = tree[key]
    return tree


TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b"\\",
    b"\xff",
    b"\xc3",
    b"\x00",
    b"NaN",
    b"Infinity",
    b"-1e400",
    b"1e309",
    b"null",
    b'"ts":1,"ts":',
    b'{"ph":"B","ts":5}',
    b'{"ph":"E","ts":-3}',
    b"[" * 2000,
]


def mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """The bytes truncated, or with a few bytes flipped, deleted, inserted (JSON tokens, bad UTF-8) or duplicated."""
    kind = data.draw(st.sampled_from(["truncate", "edit"]))
    if kind == "truncate":
        return raw[: data.draw(st.integers(0, len(raw) - 1))]
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(out) - 1))
        edit = data.draw(st.sampled_from(["flip", "delete", "insert", "duplicate"]))
        if edit == "flip":
            out[at] = data.draw(st.integers(0, 255))
        elif edit == "delete":
            del out[at : at + data.draw(st.integers(1, 16))]
        elif edit == "insert":
            out[at:at] = data.draw(st.sampled_from(TOKENS))
        else:
            start = data.draw(st.integers(0, len(out) - 1))
            out[at:at] = out[start : start + data.draw(st.integers(1, 200))]
        if not out:
            break
    return bytes(out)


@pytest.fixture(scope="module")
def small_trace() -> bytes:
    """A small, valid trace: the first 500 events of an emulator sample with its metadata."""
    document = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    document["traceEvents"] = document["traceEvents"][:500]
    return json.dumps(document).encode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# --- the trace loader -----------------------------------------------------------------------------------------------

FUZZ = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(data=st.data(), compress=st.booleans())
def test_mutated_trace_bytes_scan_or_fail_cleanly(data, compress, small_trace, folder):
    mutated = mutate_bytes(data, small_trace)
    path = folder / ("mutated.json.gz" if compress else "mutated.json")
    path.write_bytes(gzip.compress(mutated) if compress else mutated)
    assert_clean(invoke("scan", path, "--format", "json"), str(path))


@FUZZ
@given(data=st.data())
def test_truncated_or_corrupt_gzip_fails_cleanly(data, small_trace, folder):
    packed = gzip.compress(small_trace)
    path = folder / "broken.json.gz"
    path.write_bytes(mutate_bytes(data, packed))
    assert_clean(invoke("info", path), str(path))


@FUZZ
@given(data=st.data())
def test_mutated_xspace_bytes_scan_or_fail_cleanly(data, folder):
    """A raw XSpace flipped, cut, spliced: read as the planes it still holds, or refused in one line."""
    path = folder / "mutated.xplane.pb"
    path.write_bytes(mutate_bytes(data, XSPACE.read_bytes()))
    assert_clean(invoke("scan", path, "--format", "json"), str(path))


@pytest.fixture(scope="module")
def hlo_protos() -> list[bytes]:
    """The real capture's programs' HloProtos, and programs of collectives as each of XLA's releases writes them."""
    collectives = sorted((DATA / "hlo").glob("*_jax*.hlo_proto.pb"))
    return [proto for _, proto in xspace.hlo_protos(str(XSPACE))] + [path.read_bytes() for path in collectives]


@FUZZ
@given(data=st.data())
def test_mutated_hlo_programs_give_ops_or_none(data, hlo_protos):
    """A program's HLO flipped, cut, spliced: its ops and collectives as far as they decode (never a negative FLOP or
    byte, never a group of no rank), or none."""
    programs = Programs()
    programs.add("jit_fuzzed(1)", mutate_bytes(data, data.draw(st.sampled_from(hlo_protos))))
    for op in programs.ops(1).values():
        assert op.work.flops >= 0 and op.work.bytes >= 0
    for moved in programs.messages(1).values():
        assert not moved.nbytes < 0 and not moved.ranks < 1  # NaN where unknown


EVENT_FIELDS = {
    "ph": st.one_of(st.sampled_from(list("XBEiIMCsfbentPON")), ANY_VALUE),
    "name": st.one_of(
        st.sampled_from(
            [
                "aten::mm",
                "cudaLaunchKernel",
                "ProfilerStep#3",
                "thread_name",
                "process_name",
                "Memcpy HtoD",
                "aclopCompile",
            ]
        ),
        ANY_VALUE,
    ),
    "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "gpu_memcpy", "cuda_runtime", "step", "compute"]), ANY_VALUE),
    "pid": st.one_of(st.integers(0, 4), ANY_VALUE),
    "tid": st.one_of(st.integers(0, 4), ANY_VALUE),
    "ts": st.one_of(st.floats(-1e3, 1e7), ANY_VALUE),
    "dur": st.one_of(st.floats(-10, 1e4), ANY_VALUE),
    "id": ANY_VALUE,
    "args": st.one_of(
        st.fixed_dictionaries({"name": st.sampled_from(["GPU 0", "python3", "stream 7", "CPU"])}), ANY_VALUE
    ),
}
EVENTS = st.lists(st.fixed_dictionaries({}, optional=EVENT_FIELDS), max_size=40)


@FUZZ
@given(events=EVENTS, as_object=st.booleans(), unit=st.sampled_from([None, "ms", "ns", 3]))
def test_random_events_scan_or_fail_cleanly(events, as_object, unit, folder):
    document: Any = {"traceEvents": events} if as_object else events
    if as_object and unit is not None:
        document["displayTimeUnit"] = unit
    path = folder / "events.json"
    path.write_text(json.dumps(document))  # NaN and Infinity come out as the bare tokens some tools write
    result = invoke("scan", path, "--format", "json")
    assert_clean(result, str(path))
    if result.exit_code != 2:
        assert json.loads(result.stdout)["traces"][0]["path"] == str(path)


@FUZZ
@given(
    depth=st.integers(900, 20_000),
    where=st.sampled_from(["args", "metadata", "events"]),
    opener=st.sampled_from("[{"),
)
def test_deeply_nested_json_is_refused(depth, where, opener, folder):
    nested = ("[" * depth + "]" * depth) if opener == "[" else ('{"a":' * depth + "1" + "}" * depth)
    text = {
        "args": '{"traceEvents":[{"ph":"X","ts":1,"dur":1,"args":%s}]}',
        "metadata": '{"deep":%s,"traceEvents":[{"ph":"X","ts":1,"dur":1}]}',
        "events": '{"traceEvents":%s}',
    }[where] % nested
    path = folder / "nested.json"
    path.write_text(text)
    assert_clean(invoke("info", path), str(path))


# --- the rule loader and templates ----------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_mutated_rule_files_load_or_fail_cleanly(data, folder):
    document = mutate_tree(data, yaml.safe_load(RULE.read_text()))
    directory = folder / "rules"
    directory.mkdir(exist_ok=True)
    path = directory / "PT901-fuzzed.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    assert_clean(invoke("rules", "list", "--rules", directory), str(path))


TEMPLATE_PIECES = st.sampled_from(
    [
        "{cost_pct:.1f}",
        "{cost_ms}",
        "{x.__class__}",
        "{0}",
        "{cost_ms[0]}",
        "{cost_ms:>{width}}",
        "{cost_ms:>100000}",
        "{cost_ms!r}",
        "{",
        "}",
        "{{",
        "text ",
        "{cost_pct:.1%}",
        "{cost_ms:d}",
        "{steps:,}",
        "{__import__}",
    ]
)


@given(
    pieces=st.lists(TEMPLATE_PIECES, max_size=6),
    values=st.dictionaries(st.sampled_from(["cost_ms", "cost_pct", "steps", "x", "__import__"]), ANY_VALUE),
)
def test_templates_reach_only_plain_values(pieces, values):
    template = "".join(pieces)
    try:
        names = template_fields(template)
    except ValueError:
        return  # refused when the rule file loads, with the file and line
    if set(names) <= set(values):
        text = fill(template, values)
        # each piece gives at most its value written out (the longest, 100,000 characters and its quotes; a number
        # with all its digits, 1e308 as a percentage: 312) or its width (a template's go up to 100): never more
        assert isinstance(text, str) and len(text) <= len(pieces) * (100_000 + 400)


# --- the config loaders ---------------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(EXAMPLES)))
def test_mutated_emulator_and_tune_configs_load_or_fail_cleanly(data, name, folder):
    document = mutate_tree(data, yaml.safe_load(EXAMPLES[name].read_text()))
    path = folder / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    for model, loader in ((EmulatorConfig, load_config), (TuneConfig, load_tune_config)):
        try:
            loaded = loader(path) if loader is load_tune_config else loader(path, [], model)
        except PerftoolError as exc:
            message = str(exc)
            assert "\n" not in message and message.startswith(str(path)), message
        else:
            assert isinstance(loaded, model)


@FUZZ
@given(data=st.data())
def test_mutated_knobs_emulate_or_fail_cleanly(data, folder):
    document = yaml.safe_load(EXAMPLES["hpu"].read_text())
    document.pop("tune")
    document["knobs"] = mutate_tree(data, document["knobs"])
    document["workload"] = mutate_tree(data, document["workload"], mutations=1)
    if isinstance(document["workload"], dict):
        document["workload"]["steps"] = 64  # any length is valid; short runs keep the suite fast
    path = folder / "knobs.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    result = invoke("emulate", path, "--format", "json")
    assert_clean(result, str(path))
    if result.exit_code == 0:
        assert json.loads(result.stdout)["prediction"]


@FUZZ
@given(data=st.data())
def test_mutated_tune_sections_sweep_or_fail_cleanly(data, folder):
    document = yaml.safe_load(EXAMPLES["gpu"].read_text())
    document["tune"] = mutate_tree(data, document["tune"])
    document["workload"]["steps"] = 32
    path = folder / "tune.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    assert_clean(invoke("tune", path, "--evaluations", "40", "--format", "json"), str(path))


# --- gate's inputs --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scan_result(folder) -> Path:
    path = folder / "baseline.findings.json"
    assert invoke("scan", SAMPLE, "--format", "json", "-o", path).exit_code == 0
    return path


@FUZZ
@given(data=st.data(), as_bytes=st.booleans())
def test_mutated_scan_results_gate_or_fail_cleanly(data, as_bytes, scan_result, folder):
    raw = scan_result.read_bytes()
    if as_bytes:
        mutated = mutate_bytes(data, raw)
    else:
        mutated = json.dumps(mutate_tree(data, json.loads(raw), mutations=2)).encode()
    path = folder / "candidate.findings.json"
    path.write_bytes(mutated)
    assert_clean(invoke("gate", scan_result, path, "--format", "json"), str(path))


@FUZZ
@given(data=st.data())
def test_mutated_budgets_fail_cleanly(data, scan_result, folder):
    budget = {"metrics": {"device.idle_fraction": {"warn": 0.05, "error": 0.2}, "step_time_us.median": {"error": 5e4}}}
    path = folder / "budget.yaml"
    path.write_text(yaml.safe_dump(mutate_tree(data, budget), allow_unicode=True))
    assert_clean(invoke("gate", scan_result, "--budget", path), str(path))


# --- diff: the parts always add up ---------------------------------------------------------------------------------

OPS = ("aten::linear", "aten::gelu", "aten::add_", "aten::index_put_", "aten::dropout")
KERNELS = (
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)",
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<float> >(int)",
    "void at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(int)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
)
# one launch: op, kernel, kernel µs, stream, device gap before it, whether a host op launched it (else unlinked)
LAUNCH = st.tuples(
    st.integers(0, len(OPS) - 1),
    st.integers(0, len(KERNELS) - 1),
    st.floats(1, 500),
    st.sampled_from([7, 8]),
    st.floats(0, 50),
    st.booleans(),
)
KINETO_PLAN = st.tuples(
    st.lists(st.lists(LAUNCH, min_size=1, max_size=6), min_size=3, max_size=6),  # steps
    st.floats(0, 300),  # host time after the last kernel of a step
    st.booleans(),  # record_function ranges around the host ops
)


def kineto_from(plan: tuple) -> dict:
    """A Kineto trace of ``plan``'s steps: host ops launching kernels on two streams through flows, overlapping
    where the streams do, with idle stretches of random length."""
    steps, tail, annotate = plan
    host, gpu = 4242, 0
    events: list[dict] = [
        {"ph": "M", "name": "process_labels", "pid": host, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": gpu, "tid": 0, "args": {"labels": "GPU 0"}},
        *({"ph": "M", "name": "thread_name", "pid": gpu, "tid": s, "args": {"name": f"stream {s}"}} for s in (7, 8)),
    ]
    t, ident = 0.0, 0
    for i, launches in enumerate(steps):
        free = {7: t, 8: t}
        host_end = t + 2 + 4 * len(launches)
        for k, (op, kernel, us, stream, gap, launched) in enumerate(launches):
            at = t + 2 + 4 * k
            start = max(free[stream], at + 2) + gap
            free[stream] = start + us
            ident += 1
            kernel_args = {"correlation": ident} if launched else {}
            events.append({"ph": "X", "name": KERNELS[kernel], "cat": "kernel", "pid": gpu, "tid": stream,
                           "ts": start, "dur": us, "args": kernel_args})  # fmt: skip
            if launched:
                events += [
                    {"ph": "X", "name": OPS[op], "cat": "cpu_op", "pid": host, "tid": 1, "ts": at, "dur": 3.5},
                    {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": host, "tid": 1,
                     "ts": at + 1, "dur": 2, "args": {"correlation": ident}},
                    {"ph": "s", "id": ident, "pid": host, "tid": 1, "ts": at + 1, "cat": "ac2g", "name": "ac2g"},
                    {"ph": "f", "id": ident, "pid": gpu, "tid": stream, "ts": start, "cat": "ac2g", "name": "ac2g",
                     "bp": "e"},
                ]  # fmt: skip
        end = max(*free.values(), host_end) + tail + 1
        events.append({"ph": "X", "name": f"ProfilerStep#{i}", "cat": "user_annotation", "pid": host, "tid": 1,
                       "ts": t, "dur": end - t - 0.5})  # fmt: skip
        if annotate:
            middle = t + 2 + 4 * (len(launches) // 2)
            events += [
                {"ph": "X", "name": "## forward ##", "cat": "user_annotation", "pid": host, "tid": 1,
                 "ts": t + 1, "dur": middle - t - 1.5},
                {"ph": "X", "name": "## backward ##", "cat": "user_annotation", "pid": host, "tid": 1,
                 "ts": middle - 0.25, "dur": host_end - middle},
            ]  # fmt: skip
        t = end
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}], "traceEvents": events}


@settings(  # each example diffs two traces at five levels: a sixth of the profile's examples
    max_examples=max(settings.default.max_examples // 6, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(baseline=KINETO_PLAN, candidate=KINETO_PLAN)
def test_a_diffs_parts_add_up_to_the_change_at_every_level(baseline, candidate, folder):
    """Whatever the two traces hold (overlapping streams, kernels no op launched, idle of any length), each
    level's rows and remainders together are the measured change of the mean steady step."""
    from perftool.api import diff
    from perftool.common.choices import LEVELS

    paths = []
    for name, plan in (("base.json", baseline), ("cand.json", candidate)):
        paths.append(folder / name)
        paths[-1].write_text(json.dumps(kineto_from(plan)))
    for level in LEVELS:
        try:
            result = diff(*paths, by=level)
        except PerftoolError:
            continue  # nothing to compare at any level: a clear exit 2, tested elsewhere
        (compared,) = result.diffs
        scale = max(compared.baseline.step_us, compared.candidate.step_us, 1.0)
        assert abs(compared.attributed_us - compared.delta_us) <= 1e-6 * scale, (level, compared.level)


# --- the Python API's arguments -------------------------------------------------------------------------------------

TUNE_SPACE = ["tune.space={loop_size: [1, 8]}"]
API_CALLS: dict[str, tuple[Any, tuple[str, ...]]] = {  # a call with valid inputs, and the parameters to vary in it
    "scan": (lambda trace, **kw: api.scan(trace, **kw),
             ("evidence", "max_bytes", "job_steps", "device", "dialect", "select", "ignore", "workers", "config")),
    "gate": (lambda trace, **kw: api.gate(trace, trace, **kw),
             ("fail_on", "threshold", "alpha", "allow_mismatch", "device", "dialect", "max_bytes", "rule_dirs")),
    "diff": (lambda trace, **kw: api.diff(trace, trace, **kw), ("by", "op_maps", "dialect", "max_bytes")),
    "tune": (lambda _, **kw: api.tune(EXAMPLES["npu"], TUNE_SPACE, **kw), ("strategy", "evaluations", "scheduler")),
    "emulate": (lambda _, **kw: api.emulate(REPO / "sample_traces" / "npu" / "healthy.yaml", **kw), ("overrides",)),
}  # fmt: skip


@pytest.fixture(scope="module")
def small_trace_file(small_trace, folder) -> Path:
    path = folder / "small.trace.json"
    path.write_bytes(small_trace)
    return path


@settings(max_examples=max(settings.default.max_examples // 2, 1), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(data=st.data())
def test_api_arguments_of_any_type_give_a_result_or_one_perftool_error(data, small_trace_file):
    """Wrong types (``evidence='5'``, ``max_bytes='1GB'``), values out of range (``threshold=5``, NaN) and
    unknown choices (``fail_on='bad'``) raise PerftoolError, one line naming the call and parameter."""
    name = data.draw(st.sampled_from(sorted(API_CALLS)))
    call, parameters = API_CALLS[name]
    chosen = data.draw(st.sets(st.sampled_from(parameters), min_size=1, max_size=2))
    arguments = {parameter: data.draw(ANY_VALUE) for parameter in sorted(chosen)}
    try:
        call(small_trace_file, **arguments)
    except PerftoolError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("jobs", [0, -1, "2", 2.0, True, 257, None])
def test_tune_jobs_must_be_a_count_of_processes(jobs):
    with pytest.raises(PerftoolError, match=r"^tune\(\): jobs: "):
        api.tune(EXAMPLES["npu"], TUNE_SPACE, jobs=jobs)


# --- job directories ------------------------------------------------------------------------------------------------

FILE_NAMES = ("rank{i}.trace.json", "rank{i}.json.gz", "worker_{i}.pt.trace.json", "report.json", "notes.txt",
              "rank{i}.sarif.json", "page.json")  # fmt: skip
CONTENTS = ("trace", "empty", "garbage", "schema", "html", "truncated")


def job_file(kind: str, rank: int, world: Any, small_trace: bytes, data: st.DataObject) -> bytes:
    """One file of a job directory: a rank's trace (its world size any number), or something else."""
    if kind in ("trace", "truncated"):
        document = json.loads(small_trace)
        document["distributedInfo"] = {"rank": rank, "world_size": world}
        raw = json.dumps(document).encode()
        return raw[: data.draw(st.integers(0, len(raw) - 1))] if kind == "truncated" else raw
    return {
        "empty": b"",
        "garbage": data.draw(st.binary(max_size=64)),
        "schema": json.dumps({"schema": "perftool.scan/1", "traces": []}).encode(),
        "html": b"<!doctype html><title>report</title>",
    }[kind]


@settings(max_examples=max(settings.default.max_examples // 6, 1), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(data=st.data())
def test_any_job_directory_scans_or_fails_cleanly_and_stays_as_it_was(data, small_trace, tmp_path_factory):
    """Ranks, reports, damaged and foreign files, world sizes of any size: a result or one line, nothing in
    the directory changed, and an output aimed into it refused before any work."""
    job = tmp_path_factory.mktemp("job")
    for i in range(data.draw(st.integers(1, 4))):
        name = data.draw(st.sampled_from(FILE_NAMES)).format(i=i)
        content = job_file(data.draw(st.sampled_from(CONTENTS)), i, data.draw(EXTREME_NUMBERS), small_trace, data)
        (job / name).write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    before = {path.name: path.read_bytes() for path in job.iterdir()}
    invoke("scan", job, "--workers", "1", "--format", data.draw(st.sampled_from(["text", "json", "markdown"])))
    refused = invoke("scan", job, "--workers", "1", "-o", job / data.draw(st.sampled_from([*before, "out.json"])))
    assert refused.exit_code == 2 and "is inside" in refused.stderr
    assert {path.name: path.read_bytes() for path in job.iterdir()} == before
