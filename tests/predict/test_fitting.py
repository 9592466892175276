"""The fit, figure by figure: an emulated trace, stripped of the config the emulator records in it, is fitted back
to the settings it was emulated with; what a user gives the fit wins over what it reads; and each of its
measurements (the host's time, syncs each step, loop size, gradients, input, spreads) on traces whose figures are
worked out by hand."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from builders import ARGS, NCCL, eager_steps, kineto_job, meta, span
from builders import stripped as stripped_sample
from conftest import REPO

from perftool.analysis import intervals
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.host_work import dispatch_per_step
from perftool.analysis.in_process_input import loading_per_batch
from perftool.analysis.loader import batches_in_order
from perftool.common.errors import PerftoolError
from perftool.emulator.config import DTYPE_BYTES, EmulatorConfig, load_config
from perftool.emulator.plan import io_tiles_needed
from perftool.emulator.profiles import PROFILES
from perftool.emulator.simulate import COMPUTE_STREAM, jitter
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.predict import fitting
from perftool.predict.fitting import HOST_PACE, INPUT_PACE, LAUNCH_PACE, fit, read_settings
from perftool.trace.model import Kind, Role, Trace

SAMPLES = REPO / "sample_traces"
Analysed = tuple[Trace, TraceAnalysis]


def _analysed(path: Path) -> Analysed:
    trace = load_trace(str(path))
    return trace, analyse_trace(trace, [])[1]


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """stripped(sample) -> the sample's trace without the config the emulator records in it, analysed as scan does."""
    directory = tmp_path_factory.mktemp("stripped")
    return cache(lambda sample: _analysed(stripped_sample(sample, directory)))


@pytest.fixture(scope="module")
def fitted(stripped):
    """fitted(sample) -> (the fit at the sample's batch size, the config the sample was emulated with)."""

    @cache
    def fitted_sample(sample: str) -> tuple[EmulatorConfig, EmulatorConfig]:
        emulated = load_config(str(SAMPLES / f"{sample}.yaml"))
        return fit(*stripped(sample), given={"knobs": {"batch_size": emulated.knobs.batch_size}}), emulated

    return fitted_sample


@pytest.fixture
def analysed(tmp_path):
    """analysed(document) -> the trace written from ``document``, analysed as scan does."""

    def write(document: dict) -> Analysed:
        path = tmp_path / "trace.json"
        path.write_text(json.dumps(document))
        return _analysed(path)

    return write


# --- the settings a trace was emulated with, fitted back ---


def _host_us(config: EmulatorConfig) -> float:
    """The host's time per device call, µs (its device's figures, with the config's overrides)."""
    return config.profile.python_us + config.profile.call_dispatch_us


@pytest.mark.parametrize(
    "sample", ["npu/host_bound_loop_size", "ipu/host_bound_device_iterations", "gpu/sync_every_step"]
)
def test_a_host_the_device_waits_for_is_fitted_its_time_per_call(fitted, sample):
    """The device idles each step while the host works: the host's time per call is the emulated host's within 1%,
    its dispatch the family's."""
    config, emulated = fitted(sample)
    assert config.knobs.loop_size == emulated.knobs.loop_size == 1
    assert _host_us(config) == pytest.approx(_host_us(emulated), rel=0.01)
    assert config.profile.call_dispatch_us == emulated.profile.call_dispatch_us


@pytest.mark.parametrize("sample", ["hpu/host_bound_no_hpu_graphs", "gpu/launch_bound_no_cuda_graphs"])
def test_a_host_that_launches_op_by_op_is_fitted_the_time_it_launches_a_step(fitted, sample):
    """Without device graphs the host's time a step is its Python and one launch per op: the fit's ops (what the
    trace shows) at its launch time make the emulated host's step within 1%."""
    config, emulated = fitted(sample)

    def per_step(c: EmulatorConfig) -> float:
        return c.profile.python_us + c.workload.ops_per_step * c.profile.op_launch_us

    assert config.knobs.device_graphs is False and emulated.knobs.device_graphs is False
    assert per_step(config) == pytest.approx(per_step(emulated), rel=0.01)


def test_a_host_that_reads_a_value_back_each_step_is_fitted_so(fitted):
    assert fitted("gpu/sync_every_step")[0].workload.sync_each_step is True
    assert fitted("gpu/healthy")[0].workload.sync_each_step is False


@pytest.mark.parametrize(
    ("sample", "loop"),
    [("npu/healthy", 32), ("npu/host_bound_loop_size", 1), ("ipu/healthy", 64), ("npu/recompile_remainder_loop", 32)],
)
def test_the_loop_size_is_the_traces_remainder_loop_included(fitted, sample, loop):
    config, emulated = fitted(sample)
    assert config.knobs.loop_size == emulated.knobs.loop_size == loop


@pytest.mark.parametrize(
    "sample", ["npu/healthy", "hpu/healthy", "gpu/healthy", "ipu/healthy", "ipu/serialised_transfers_no_io_tiles"]
)
def test_the_bytes_a_sample_copies_are_the_emulated_ones_within_one_percent(fitted, sample):
    """The copies' time a step at the link's bandwidth: the sample's size in the dtype it is sent in."""
    config, emulated = fitted(sample)
    sent = emulated.workload.sample_size * DTYPE_BYTES[emulated.knobs.transfer_dtype] / 4
    assert config.workload.sample_size == pytest.approx(sent, rel=0.01)


def test_io_tiles_are_fitted_where_copies_overlap_compute_as_many_as_a_batch_needs(fitted):
    config, _ = fitted("ipu/healthy")
    assert config.knobs.io_tiles == io_tiles_needed(config.workload.sample_size * config.knobs.batch_size) == 3
    assert fitted("ipu/serialised_transfers_no_io_tiles")[0].knobs.io_tiles == 0  # copies apart from compute


def test_a_cpu_fallback_is_fitted_its_host_time_calls_and_tensor(fitted):
    config, emulated = fitted("hpu/cpu_fallback")
    (op,) = config.knobs.cpu_fallback_ops
    (truth,) = emulated.knobs.cpu_fallback_ops
    assert op.host_us == pytest.approx(truth.host_us, rel=1e-3)
    assert op.tensor_size == pytest.approx(truth.tensor_size, rel=1e-3)
    assert op.calls_per_step == truth.calls_per_step == 1 and op.op == truth.op == "digamma"
    assert fitted("hpu/healthy")[0].knobs.cpu_fallback_ops == ()


@pytest.mark.parametrize("sample", ["npu/strided_copies_transdata", "ipu/strided_copies"])
def test_layout_copies_are_fitted_the_bytes_they_rearrange(fitted, sample):
    config, emulated = fitted(sample)
    assert config.knobs.layout_mismatch is emulated.knobs.layout_mismatch is True
    assert config.workload.layout_copy_per_sample == pytest.approx(emulated.workload.layout_copy_per_sample, rel=1e-3)
    healthy = fitted(sample.split("/")[0] + "/healthy")[0]
    assert healthy.knobs.layout_mismatch is False and healthy.workload.layout_copy_per_sample == 0


def test_offloaded_optimizer_state_is_fitted_the_state_streamed_a_step(fitted):
    """The state is streamed in and out once an update, one update every ``gradient_accumulation`` steps."""
    config, emulated = fitted("ipu/offload_stream_copies")
    assert config.knobs.offload_optimizer is emulated.knobs.offload_optimizer is True
    per_step = emulated.workload.optimizer_state / emulated.knobs.gradient_accumulation
    assert config.workload.optimizer_state == pytest.approx(per_step, rel=0.01)
    assert fitted("ipu/healthy")[0].knobs.offload_optimizer is False


@pytest.mark.parametrize("sample", ["npu/input_bound_prefetch", "ipu/input_bound_prefetch", "npu/healthy"])
def test_input_workers_are_fitted_their_number_depth_and_time(fitted, stripped, sample):
    """Their time a sample and its spread within a fifth of the emulated (the trace's batches are the draws of a
    capture, not the distribution's figures), their number and prefetch depth exactly."""
    config, emulated = fitted(sample)
    work, truth = config.workload, emulated.workload
    assert (work.input_workers, config.knobs.prefetch_depth) == (truth.input_workers, emulated.knobs.prefetch_depth)
    assert work.preprocess_us_per_sample == pytest.approx(truth.preprocess_us_per_sample, rel=0.2)
    assert work.preprocess_jitter == pytest.approx(truth.preprocess_jitter, rel=0.2)
    assert len(work.preprocess_replay) > 200  # the window's batches, replayed in turn ...
    trace, scope = stripped(sample)
    batches = (trace.kind == Kind.INPUT) & trace.on_roles(Role.INPUT)
    ordered = batches_in_order(trace, np.flatnonzero(batches))
    seen = scope.in_window[ordered]
    first = trace.dur[ordered[seen]]
    assert work.preprocess_replay[int(np.argmax(seen))] == pytest.approx(first[0] / first.mean(), rel=1e-3)
    # ... each where the trace's loop took it: the window's first batch is the fit's batch of that index


def test_a_last_batch_that_compiles_again_is_fitted_short_as_the_trace_computes_it(fitted, stripped):
    """The trace's last step computes about 6/16 of a full one (5 samples, and the new shape's own cost); the fit
    runs the trace's steps, its last one short."""
    config, emulated = fitted("hpu/recompile_unpadded_last_batch")
    assert config.workload.steps == emulated.workload.steps == 200
    assert config.workload.last_batch_samples == 6 and emulated.workload.last_batch_samples == 5
    two = fit(*stripped("hpu/recompile_unpadded_last_batch"), given={"knobs": {"batch_size": 2}})
    assert two.workload.last_batch_samples == 1  # the least a short batch holds


def test_the_batch_is_one_sample_unless_a_short_last_batch_needs_room(stripped):
    assert fit(*stripped("npu/healthy")).knobs.batch_size == 1
    assert fit(*stripped("hpu/recompile_unpadded_last_batch")).knobs.batch_size == fitting.RECOMPILE_BATCH


def test_the_settings_read_from_the_trace(stripped, fitted):
    """The prefetch depth where the workers show it, the last batch where the fit runs a short one."""
    healthy, recompiling = fitted("npu/healthy")[0], fitted("hpu/recompile_unpadded_last_batch")[0]
    shown = read_settings(stripped("npu/healthy")[0], healthy)
    assert "prefetch_depth" in shown and "last_batch" not in shown and fitting.READ_FROM_TRACE <= shown
    unseen = read_settings(stripped("hpu/cpu_fallback")[0], recompiling)
    assert "prefetch_depth" not in unseen and "last_batch" in unseen


# --- what the user gives ---


def test_a_given_efficiency_batch_shares_the_work_with_the_batch(stripped):
    """A step computes ``batch + half_efficiency_batch`` samples' worth: each sample's work is that share."""
    plain = fit(*stripped("npu/healthy"), given={"knobs": {"batch_size": 4}})
    halved = fit(*stripped("npu/healthy"), given={"knobs": {"batch_size": 4}, "workload": {"half_efficiency_batch": 4}})
    assert halved.workload.half_efficiency_batch == 4
    assert halved.workload.gflops_per_sample == pytest.approx(plain.workload.gflops_per_sample / 2, rel=1e-9)


def _per_sample(config: EmulatorConfig, compute_us: float) -> float:
    """The GFLOP a sample of ``config``, a fit given ``compute_us`` of device work a step: over the fit's own draw of
    its compute jitter (so that its mean compute is the trace's), at the device's peak and efficiency."""
    work, profile = config.workload, config.profile
    drawn = float(jitter(fitting.FIT_SEED, work.steps, work.compute_jitter, COMPUTE_STREAM)[1:].mean())
    batch = config.knobs.batch_size + work.half_efficiency_batch
    return compute_us / drawn * profile.peak_tflops * profile.efficiency / 1e3 / batch


def test_the_work_a_sample_is_the_traces_device_work_at_the_familys_peak(stripped, analysed):
    trace, scope = stripped("npu/healthy")
    config = fit(trace, scope, given={"knobs": {"batch_size": 4}})
    per_step = fitting.work_per_step(trace, scope)
    assert config.workload.gflops_per_sample == pytest.approx(_per_sample(config, per_step), rel=1e-9)
    assert config.workload.name == "npu_healthy.trace.json.gz"  # the trace's file
    trace, scope = analysed(_synced_steps(steps=1))  # one steady step
    one = fit(trace, scope)
    assert one.workload.gflops_per_sample == pytest.approx(_per_sample(one, fitting.work_per_step(trace, scope)))


def test_given_host_figures_are_kept_and_nothing_is_matched_to_the_step(stripped):
    """The fit sets the host's time (or the input's, where the user gives neither) so that its step is the trace's;
    a user who gives either has the fit's closed forms, and their own figures, as they are."""
    sample = stripped("npu/host_bound_loop_size")
    matched = fit(*sample).device_overrides
    unmatched = fit(*sample, given={"device_overrides": {}}).device_overrides
    assert matched.python_us != pytest.approx(unmatched.python_us, rel=1e-6)
    preprocess = fit(*sample, given={"workload": {"preprocess_us_per_sample": 100.0}})
    assert preprocess.device_overrides == unmatched and preprocess.workload.preprocess_us_per_sample == 100.0
    given = fit(*sample, given={"device_overrides": {"python_us": 1234.0}}).device_overrides
    assert (given.python_us, given.call_dispatch_us) == (1234.0, unmatched.call_dispatch_us)


def test_a_given_value_the_config_refuses_names_the_calibrated_trace(stripped):
    with pytest.raises(PerftoolError, match=r"calibration of .*npu_healthy\.trace\.json\.gz"):
        fit(*stripped("npu/healthy"), given={"workload": {"steps": "many"}})


def test_replica_figures_for_a_fit_that_models_none_are_refused_naming_why(stripped, tmp_path):
    """Given without their count, replicas the trace does not show would be half a config: refused in one line
    that says why and what to give; with their count, they are the user's what-if and kept."""
    with pytest.raises(
        PerftoolError, match=r"replicas\.latency_us given, but the trace shows no all-reduce across"
    ) as error:
        fit(*stripped("npu/healthy"), given={"replicas": {"latency_us": 7.0}})
    assert "give replicas.count to model replicas anyway" in str(error.value) and "\n" not in str(error.value)
    modelled = fit(*stripped("npu/healthy"), given={"replicas": {"count": 2, "latency_us": 7.0}}).replicas
    assert modelled is not None and (modelled.count, modelled.latency_us) == (2, 7.0)


def test_replica_figures_for_all_reduces_the_fit_counts_as_device_work_are_refused(analysed):
    """Replicas fitted to this job's all-reduces do not reproduce its steps: the fit counts them as device work."""
    job = kineto_job(steps=8, host_args=ARGS)
    job["traceEvents"].append(span("autograd::engine::evaluate_function: MmBackward0", 100, 1, 30, 10, "cpu_op"))
    trace, scope = analysed(job)
    assert fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ()) is not None
    assert fit(trace, scope).replicas is None
    with pytest.raises(PerftoolError, match=r"replicas fitted to the trace's all-reduces do not reproduce its step"):
        fit(trace, scope, given={"replicas": {"latency_us": 7.0}})


def test_given_replicas_are_merged_into_the_fitted_ones(tmp_path):
    rank = SAMPLES / "jobs" / "npu_exposed_allreduce" / "rank0.trace.json.gz"
    trace, scope = _analysed(rank)
    replicas = fit(trace, scope, given={"replicas": {"latency_us": 7.0}}).replicas
    assert replicas is not None and replicas.latency_us == 7.0 and replicas.count >= 2


# --- the host's time per call, from the device's idle per step ---


def test_a_host_that_blocks_per_call_is_what_the_device_waits_for_times_the_loop(stripped):
    """On a device whose host waits for each call (NPU), the host's time a call is the device's wait for it a step
    times the steps a call runs; input paces the step where the device waits for it more (ties: the host)."""
    trace, scope = stripped("npu/healthy")
    profile = PROFILES["npu"]

    def host(idle: dict[str, float]) -> fitting._Host:
        return fitting._host(trace, scope, profile, idle, 1000.0, scope.steady_steps, 256, None, False, False)

    looped = host({"host": 100.0})
    assert looped.loop == 32 and looped.pacing == HOST_PACE and looped.launching is False
    assert looped.overrides == {"python_us": 3200.0 - 500.0, "call_dispatch_us": 500.0}
    assert host({"host": 100.0, "input_wait": 100.0}).pacing == HOST_PACE
    inputs = host({"host": 50.0, "input_wait": 60.0, "input_pipeline": 40.0})
    assert inputs.pacing == INPUT_PACE and inputs.overrides["python_us"] == 32 * 50.0 - 500.0
    assert host({}).pacing is None and host({}).overrides == {"python_us": 0.0, "call_dispatch_us": 0.0}
    assert host({"sync": 0.5}).pacing == HOST_PACE  # any wait at all paces the step
    assert fitting._host(trace, scope, PROFILES["gpu"], {"host": 100.0}, 1000.0, 255, 256, None, 0.0, False).loop == 1


def test_a_host_that_runs_ahead_costs_the_device_only_what_exceeds_its_compute(stripped):
    """On a GPU with graphs, the device idles once the host's time passes its compute: that time is compute plus
    the idle, or (no idle) the family's figures, at most half the compute; a host that syncs each step blocks."""
    trace, scope = stripped("gpu/healthy")
    profile = PROFILES["gpu"]
    family = profile.python_us + profile.call_dispatch_us

    def python(idle: dict[str, float], compute: float, stall: float = 0.0) -> float:
        host = fitting._host(trace, scope, profile, idle, compute, scope.steady_steps, 256, None, stall, False)
        assert host.loop == 1 and host.launching is False
        return host.overrides["python_us"] + host.overrides["call_dispatch_us"]

    assert python({"host": 100.0}, 1000.0) == 1100.0
    assert python({"host": 0.5}, 1000.0) == 1000.5
    assert python({}, 1000.0) == 500.0 and python({}, 2 * family) == family
    assert python({"sync": 100.0}, 1000.0, stall=100.0) == 100.0


def test_a_host_without_graphs_is_fitted_its_own_time_and_its_launches(analysed):
    """Op by op: the host's own time a step goes to launching (what dispatches ops) and Python (the rest, or what
    the device idles after its wait each step, less the batch it loads then); the device idles between launches for
    what that time does not explain; the host's path or the device's sets the pace."""
    trace, scope = analysed(eager_steps(20, python_us=300, ops=10, kernel_us=100))
    steps = scope.steady_steps
    own = fitting._own_host_time(trace, scope) / steps
    dispatch = min(dispatch_per_step(trace, scope), own)
    assert fitting._ops(scope, steps) == 10 and own > dispatch > 0  # Python that launches nothing

    def streamed(idle: dict[str, float], compute: float, stall=0.0, loaded=None, blocks=False) -> fitting._Host:
        host = fitting._host(trace, scope, PROFILES["gpu"], idle, compute, steps, 256, loaded, stall, blocks)
        assert host.launching is True and host.loop == 1 and host.ops == 10
        return host

    launching = streamed({"host": 900.0}, own - 300.0)  # the host's time explains 300 µs of the idle
    assert launching.overrides == {"python_us": own - dispatch, "op_launch_us": dispatch / 10}
    assert launching.workload == {"launch_idle_us": 600.0} and launching.pacing == ("workload", "launch_idle_us")
    assert streamed({"host": 900.0}, own - 900.0).workload == {"launch_idle_us": 0.0}
    assert streamed({"host": 900.0}, own - 901.0).workload == {"launch_idle_us": 0.0}
    assert streamed({"host": 200.0}, own - 300.0).pacing == LAUNCH_PACE  # the host's path is the longer
    assert streamed({"host": 0.5}, own + 10.0).workload == {"launch_idle_us": 0.5}
    assert streamed({"host": 0.5}, own).pacing == ("workload", "launch_idle_us")  # by half a microsecond
    assert streamed({"host": 300.0, "input_wait": 300.0}, own).pacing == ("workload", "launch_idle_us")
    synced = streamed({"sync": 5 * own, "host": 100.0, "input_wait": 50.0}, own, stall=5 * own)
    assert synced.overrides["python_us"] == 5 * own and synced.workload == {"launch_idle_us": 100.0}
    loaded = np.full(steps, own)  # after each wait it loads its batch (the device waits for it) and runs Python
    loading = streamed({"sync": 4 * own, "input_wait": own, "host": 30.0}, own, stall=5 * own, loaded=loaded)
    assert loading.overrides["python_us"] == pytest.approx(4 * own) and loading.pacing == LAUNCH_PACE
    assert loading.workload["launch_idle_us"] == pytest.approx(30.0)  # the idle beyond the stall: between launches
    outlasting = streamed({"sync": 10.0, "host": 900.0}, dispatch - 200.0, stall=10.0)  # launching outlasts the work
    assert outlasting.workload == {"launch_idle_us": 700.0}  # the 200 µs it outlasts the work by explain the rest
    assert streamed({"sync": 100.0}, own, stall=100.0).pacing is not None  # the wait after each sync
    assert streamed({"sync": 5 * own}, own).overrides["python_us"] == own - dispatch  # no sync each step
    unsynced = streamed({"host": 100.0}, own, stall=1.0)  # hardly a wait after it
    assert unsynced.overrides["python_us"] == own - dispatch and unsynced.workload == {"launch_idle_us": 99.0}
    inputs = streamed({"host": 100.0, "input_wait": 200.0}, own)
    assert inputs.pacing == INPUT_PACE
    # waiting in each step's pageable copy, the host runs before its first launch only the Python the device idles
    # for; the rest of its own time goes to launching, beside the device's work
    blocked = streamed({"host": 100.0}, own + 1000.0, blocks=True)
    assert blocked.overrides == {"python_us": 100.0, "op_launch_us": (own - 100.0) / 10}
    assert blocked.workload == {"launch_idle_us": 0.0}
    exposed = streamed({"host": 100.0 + own}, 0.5 * own, blocks=True)  # Python within the idle: as it was
    assert exposed.overrides == {"python_us": own - dispatch, "op_launch_us": dispatch / 10}
    assert streamed({"host": 100.0, "input_wait": 100.0}, own).pacing != INPUT_PACE
    assert streamed({}, own).pacing is None and streamed({"host": 0.5}, own).pacing is not None


def test_a_host_that_feeds_no_device_has_its_in_process_batches_as_a_worker(analysed):
    """Batches the training process loads itself are its input on a GPU (no workers, their time); on a device the
    host does not feed (an NPU's input runs in workers) they are one worker as slow as the device waits."""
    document = eager_steps(20, ops=4, kernel_us=100)
    for marker in [e for e in document["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]:
        loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        document["traceEvents"].append(span(loader, 100, 1, marker["ts"], 15, "user_annotation"))
    trace, scope = analysed(document)
    assert fit(trace, scope).workload.input_workers == 0
    assert fit(trace, scope, device="npu").workload.input_workers == 1


def test_python_preparing_the_input_inside_each_step_is_the_fit_s_in_process_loading(analysed):
    """The loop decodes and preprocesses its input in Python before each step's ops (300 µs, split over two calls of a
    video decoder and an image processor): the fit loads that much a batch in the loop, with no workers, where the
    same Python under another name is the host's own."""

    def prepared(names: tuple[str, str]) -> dict:
        document = eager_steps(20, python_us=300, ops=4, kernel_us=100)
        frames = [e for e in document["traceEvents"] if e.get("name") == "update_metrics (train.py:10)"]
        for frame in frames:  # two calls of 100 and 200 µs where the one frame was
            frame.update(name=names[0], dur=100)
            document["traceEvents"].append(span(names[1], 100, 1, frame["ts"] + 100, 200, "python_function"))
        return document

    video = ("pipelines/video_classification.py(174): read_video_pyav", "image_processing_videomae.py(178): _resize")
    loads = fit(*analysed(prepared(video))).workload
    assert (loads.input_workers, loads.preprocess_us_per_sample) == (0, 300.0)
    own = fit(*analysed(prepared(("train.py(10): update_metrics", "train.py(20): log")))).workload
    assert own.preprocess_us_per_sample == 0.0


def test_device_ops_a_step(analysed):
    trace, scope = analysed(eager_steps(20, ops=6, kernel_us=100))
    assert fitting._ops(scope, scope.steady_steps) == 6
    trace, scope = _analysed(REPO / "tests" / "data" / "torch_cpu_train.pt.trace.json.gz")
    assert fitting._ops(scope, 8) == 1  # none on a device: one, as the emulator needs


# --- the host reading a value back each step ---


def _synced_steps(steps: int = 8, skip: tuple[int, ...] = (), on_device: bool = False, python_us: float = 100) -> dict:
    """Eager steps of ``python_us`` of Python (the device idle) then four ops, each step ending in ``aten::item`` on the
    host, a device tensor's read whose synchronisation returns as the step's last kernel ends, or a stream waiting, on
    the device, but ``skip``."""
    document = eager_steps(5, python_us=python_us, ops=4, kernel_us=200, steps=steps)
    markers = [e for e in document["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    for i, marker in enumerate(markers):
        if i not in skip:
            end = marker["ts"] + marker["dur"]  # the device's last kernel ends 1 µs later
            if on_device:
                document["traceEvents"].append(span("Stream Wait Event", 0, 7, end - 3, 2, "cpu_op"))
            else:
                read = span("aten::item", 100, 1, end - 3, 4, "cpu_op")
                document["traceEvents"] += [read, span("cudaStreamSynchronize", 100, 1, end - 2.5, 3.5, "cuda_runtime")]
    return document


def _waits_each_step(analysed, document: dict) -> bool:
    trace, scope = analysed(document)
    return fitting._stall_each_step(trace, scope) > 0


def test_a_sync_each_step_that_stalls_the_device_is_a_sync_each_step(analysed):
    """After each sync the device idles while the host runs the next step's 100 µs of Python and first launch: that
    is the stall the fit gives the host before its first launch; with no Python, the device hardly idles (1 µs and
    a launch of 925 µs) and the sync waited for nothing that matters."""
    trace, scope = analysed(_synced_steps())
    assert scope.steps.count == 8 and scope.steps.warmup == 0
    assert fitting._stall_each_step(trace, scope) == pytest.approx(105.0, abs=1.0)
    assert not _waits_each_step(analysed, _synced_steps(python_us=0))
    copied = _synced_steps()  # the input copied in as the Python ends: the device's next work, though no compute
    markers = [e for e in copied["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    copied["traceEvents"] += [
        span("Memcpy HtoD (Pinned -> Device)", 0, 7, m["ts"] + 100, 3, "gpu_memcpy") for m in markers
    ]
    trace, scope = analysed(copied)
    assert fitting._stall_each_step(trace, scope) == pytest.approx(100.0, abs=1.0)


@pytest.mark.parametrize(
    ("skip", "each"),
    [((7,), True), ((6,), False), ((0,), False), (tuple(range(8)), False)],
    ids=["the last's past the trace", "the one before the last", "the first", "none"],
)
def test_every_steady_step_but_the_last_must_sync(analysed, skip, each):
    assert _waits_each_step(analysed, _synced_steps(skip=skip)) is each


def test_two_steps_judge_the_first_and_a_stream_waiting_is_no_host_sync(analysed):
    assert _waits_each_step(analysed, _synced_steps(steps=2, skip=(1,)))
    assert not _waits_each_step(analysed, _synced_steps(on_device=True))


def _read_back_steps(python_us: float = 400.0, beside_us: float = 0.0, copy: str = "DtoH (Device -> Pageable)") -> dict:
    """Steps of ``python_us`` of Python (the device idle), one op launching an 800 µs kernel, then the step's results
    copied back to pageable memory in a ``cudaMemcpyAsync`` that blocks until its copy after the kernel is done; with
    ``beside_us``, a kernel on another stream still runs that long after the read-back returns; ``copy``: the
    device's copy the call waits for."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    t = 0.0
    for step in range(8):
        begin, launched = t, t + python_us + 10
        kernel_end = launched + 800
        returned = kernel_end + 12
        events += [
            span("update_metrics (train.py:10)", 100, 1, begin, python_us, "python_function"),
            span("aten::linear", 100, 1, begin + python_us, 10, "cpu_op"),
            span("cudaLaunchKernel", 100, 1, begin + python_us + 4, 5, "cuda_runtime"),
            span("sm90_gemm", 0, 7, launched, 800, "kernel"),
            span("cudaMemcpyAsync", 100, 1, launched + 2, returned - launched - 2, "cuda_runtime"),
            span(f"Memcpy {copy}", 0, 7, kernel_end + 1, 10, "gpu_memcpy"),
            *([span("elementwise_kernel", 0, 9, launched, 812 + beside_us, "kernel")] if beside_us else []),
            span(f"ProfilerStep#{step}", 100, 1, begin, returned - begin + 1, "user_annotation"),
        ]
        t = returned + 2
    return {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}


@pytest.mark.parametrize(
    ("python_us", "beside_us", "copy", "each"),
    [
        (400.0, 0.0, "DtoH (Device -> Pageable)", True),
        (1.0, 0.0, "DtoH (Device -> Pageable)", False),
        (400.0, 50.0, "DtoH (Device -> Pageable)", False),
        (400.0, 0.0, "HtoD (Pageable -> Device)", False),
    ],
    ids=["drained, then idle", "drained, then hardly idle", "compute still running", "a copy in"],
)
def test_results_read_back_each_step_wait_for_the_step_where_they_drain_the_device(
    analysed, python_us, beside_us, copy, each
):
    """A blocking copy of results to the host that returns with no compute left running waits for the whole step,
    as a sync does: a sync each step where the device then idles 2% of the step or more; a read-back while a kernel
    still runs waited for part of the step only; a blocking copy in is the pageable input's, which the fit models
    as such."""
    assert _waits_each_step(analysed, _read_back_steps(python_us, beside_us, copy)) is each


def test_a_wait_in_a_window_without_device_work_drains_nothing():
    scope = SimpleNamespace(metrics=SimpleNamespace(busy={"device": (np.empty(0), np.empty(0))}), lo=0.0, hi=10.0)
    assert intervals.total(fitting._idle_after(scope, (np.array([1.0]), np.array([2.0])))) == 0.0


def test_the_stall_after_a_wait_runs_from_the_device_s_last_work_to_its_next(analysed):
    """From the read-back's copy ending (1 µs before the call returns) to the next step's kernel: the 2 µs before the
    step, its 400 µs of Python and the 10 µs op that launches it, 413 µs a step; a sync made while the device has
    idled since its last work waited for nothing and counts for none."""
    trace, scope = analysed(_read_back_steps())
    assert fitting._stall_each_step(trace, scope) == pytest.approx(413.0, abs=0.5)
    late = _synced_steps(skip=tuple(range(8)))
    markers = [e for e in late["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    late["traceEvents"] += [span("cudaEventSynchronize", 100, 1, m["ts"] + 50, 2, "cuda_runtime") for m in markers]
    assert not _waits_each_step(analysed, late)


# --- the loop size: steps per device call ---


def _looped(calls_at: list[int], steps: int = 10, compiles: bool = False) -> dict:
    """Steps of 1 ms with a kernel each and a graph launch (a runtime call) at the start of the steps listed."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    for step in range(steps):
        t = step * 1000.0
        events += [span(f"ProfilerStep#{step}", 100, 1, t, 999, "user_annotation"),
                   span("gemm", 0, 7, t + 100, 700, "kernel")]  # fmt: skip
    for n, step in enumerate(calls_at):
        events.append(span("cudaGraphLaunch", 100, 1, step * 1000.0 + 10 + n, 5, "cuda_runtime"))
    if compiles:
        events.append(span("compile_inner (dynamo_timed)", 100, 1, 8000.0 + 20, 5, "cpu_op"))
    return {"traceEvents": events}


@pytest.mark.parametrize(
    ("calls_at", "job_steps", "loop"),
    [
        ([0, 4, 8], 10, 5),  # calls of 4, 4 and 2 steps: 4, a divisor of the job's 10 nearest it
        ([0, 4, 8], 256, 4),
        ([0, 4, 8], 510, 5),  # 3 and 5 are as near 4: the larger
        ([0, 2, 4, 6], 8, 2),  # the count most calls run, not the largest
        ([0, 4, 6, 8], 8, 2),
        ([0, 4], 12, 6),  # 4 steps a call and 6 tie once each: the larger
        ([0], 10, 10),  # one call for the whole capture
        ([0, 9], 10, 10),
        ([0, 1, 2, 3, 4, 5], 10, 1),
        ([0, 0, 0, 4], 10, 5),  # calls that end no step do not count
        ([], 10, 1),
        (list(range(10)), 10, 1),
    ],
)
def test_the_loop_is_the_steps_most_calls_run_fitted_to_the_jobs_length(analysed, calls_at, job_steps, loop):
    trace, scope = analysed(_looped(calls_at))
    assert scope.steps.count == 10
    assert fitting._loop_size(trace, scope, job_steps) == loop


def test_a_remainder_loop_is_kept_where_the_trace_compiles_it(analysed):
    trace, scope = analysed(_looped([0, 4, 8], compiles=True))
    assert scope.metrics["recompilations.count"] > 0
    assert fitting._loop_size(trace, scope, 10) == 4
    assert fitting._loop_size(trace, scope, 12) == 4 and fitting._loop_size(trace, scope, 11) == 1


# --- data parallelism: gradients all-reduced across ranks ---


@pytest.mark.parametrize("sized", [True, False])
def test_all_reduces_become_replicas_with_the_calls_bandwidth(analysed, sized):
    """Four ranks, one 300 µs all-reduce a step (100 MB, or DDP's 25 MB bucket where the trace does not say),
    overlapping compute by a third: the bus moves 2·3/4 of the bytes in the time past the latency."""
    trace, scope = analysed(kineto_job(steps=8, host_args=ARGS if sized else None))
    profile = PROFILES["gpu"]
    gradients = fitting._gradients(scope, profile, scope.steady_steps, ())
    size = 100e6 if sized else 25e6
    latency = profile.collective_latency_us
    assert gradients is not None and gradients.bytes == size
    assert gradients.replicas == {"count": 4, "bucket": int(size), "overlap": True,
                                  "bus_bandwidth": pytest.approx(size * 1.5 / (300 - latency) / 1e3, rel=1e-9),
                                  "latency_us": latency, "slow_ranks": []}  # fmt: skip


def test_a_short_all_reduce_is_its_own_latency_at_most_half_its_time(analysed):
    document = kineto_job(steps=8, host_args=ARGS | {"Group size": 2}, world=2)
    for event in document["traceEvents"]:
        if event.get("name", "").startswith("ncclDevKernel"):
            event["ts"], event["dur"] = event["ts"] + 200, 20  # from 700 to 720 µs: after the 600 µs kernel
    trace, scope = analysed(document)
    gradients = fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ())
    assert gradients is not None
    assert gradients.replicas["count"] == 2 and gradients.replicas["latency_us"] == 10.0
    assert gradients.replicas["bus_bandwidth"] == pytest.approx(100e6 * 1.0 / 10.0 / 1e3)
    assert gradients.replicas["overlap"] is False  # after compute, none of it hidden


@pytest.mark.parametrize(
    ("args", "why"),
    [({"Group size": 1}, "one rank"), ({"In msg nelems": 0, "Out msg nelems": 0}, "no bytes")],
)
def test_all_reduces_that_move_nothing_between_ranks_are_no_replicas(analysed, args, why):
    trace, scope = analysed(kineto_job(steps=8, host_args=ARGS | args, world=args.get("Group size", 4)))
    assert fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ()) is None, why


def test_a_slow_link_is_still_a_link(analysed):
    """100 kB in 300 µs: under 1 GB/s, and replicas all the same."""
    document = kineto_job(steps=8, host_args=ARGS | {"In msg nelems": 25_000, "Out msg nelems": 25_000})
    trace, scope = analysed(document)
    gradients = fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ())
    assert gradients is not None and gradients.replicas["bus_bandwidth"] < 1.0


@pytest.mark.parametrize(
    ("relative", "ranks", "slow"),
    [
        ([], 4, []),
        ([0.05, 0.5], 3, [0.1, 0.5]),  # no rank computes faster than a tenth of the fitted one's time
        ([0.5, 1.5], 4, [0.5, 0.75]),  # nor slower than it: ranks as fast are left out
        ([0.2, 0.8], 3, [0.2, 0.8]),
        ([0.2, 0.6, 0.8], 2, [0.6]),  # one other rank: the median
        ([0.9, 1.0, 1.0], 2, []),
    ],
)
def test_the_other_ranks_compute_as_the_jobs_quantiles(relative, ranks, slow):
    peers = fitting._peers(relative, ranks)
    assert [p["rank"] for p in peers] == list(range(1, len(slow) + 1))
    assert [p["compute"] for p in peers] == pytest.approx(slow)


# --- input, spreads and short batches ---


def test_input_without_traced_workers_is_one_worker_as_slow_as_a_step_where_it_paces(stripped):
    trace, scope = _analysed(SAMPLES / "gpu_training_kineto.pt.trace.json.gz")
    assert fitting._input(trace, scope, 1000.0, True, 4, None) == {
        "preprocess_us_per_sample": 250.0,
        "input_workers": 1,
    }
    assert fitting._input(trace, scope, 1000.0, False, 4, None) == {"preprocess_us_per_sample": 0.0}


def test_batches_the_training_process_loads_itself(stripped):
    trace, scope = stripped("npu/healthy")
    loaded = fitting._input(trace, scope, 1000.0, True, 4, np.array([100.0, 300.0]))
    assert loaded == {"preprocess_us_per_sample": 50.0, "preprocess_jitter": 0.5, "input_workers": 0}
    assert fitting._input(trace, scope, 1000.0, True, 4, np.zeros(2))["preprocess_jitter"] == 0.0
    assert fitting._input(trace, scope, 1000.0, True, 4, np.array([0.5, 1.5]))["preprocess_jitter"] == 0.5
    wild = fitting._input(trace, scope, 1000.0, True, 1, np.array([1.0] * 99 + [1e6]))
    assert wild["preprocess_jitter"] == 5.0  # a spread no longer a spread


def test_replayed_batches_are_relative_to_their_mean_none_of_them_free():
    assert fitting._relative(np.array([0.0, 10.0, 20.0])) == [0.001, 1.0, 2.0]


@pytest.mark.parametrize(
    ("values", "cv"),
    [
        ([90, 100, 110], 1.4826 * 10 / 100),
        ([90.0, 110.0], 1.4826 * 10 / 100),
        ([0.5, 0.6, 0.7], 1.4826 * 0.1 / 0.6),
        ([100, 100, 100, 100, 1000], 0.0),  # one slow step is no spread
        ([5.0], 0.0),
        ([0.0, 0.0, 1.0], 0.0),  # a median of nothing
    ],
)
def test_spread_is_a_robust_coefficient_of_variation(values, cv):
    assert fitting.spread(values) == pytest.approx(cv)


def test_the_compute_spread_defaults_and_caps():
    assert fitting._compute_spread(np.array([1000.0])) == fitting.DEFAULT_COMPUTE_JITTER
    assert fitting._compute_spread(np.array([90.0, 110.0])) == pytest.approx(0.14826)
    assert fitting._compute_spread(np.array([10.0, 100.0, 1000.0])) == fitting.MAX_COMPUTE_JITTER


def test_the_fits_own_draw_is_the_mean_of_its_steady_factors():
    for steps in (2, 8):
        drawn = jitter(fitting.FIT_SEED, steps, 0.1, COMPUTE_STREAM)[1:].mean()
        assert fitting._own_draw(0.1, steps) == pytest.approx(drawn, rel=1e-12) != 1.0
    assert fitting._own_draw(0.1, 1) == 1.0


@pytest.mark.parametrize(
    ("busy", "batch", "samples"),
    [
        ([120, 120, 100, 100, 60], 16, 9),  # 60 of the others' median 110
        ([1.0, 1.0, 1.0, 1.0, 0.5], 16, 8),
        ([100, 100, 100, 100, 1], 16, 1),  # at least one sample
        ([100, 100, 100, 100, 89], 4, 3),  # fewer than a batch
        ([100, 100, 100, 100, 80], 2, 1),
        ([100, 100, 100, 100, 90], 16, None),  # 0.9 of a step is a full one
        ([100, 100, 100, 100, 0], 16, None),  # a last step computing nothing says nothing
        ([100, 100, 50], 16, None),  # too few steps before it
        ([0, 0, 0, 0, 0], 16, None),
    ],
)
def test_a_short_last_batch_holds_the_share_the_last_step_computes(busy, batch, samples):
    assert fitting._short_last(np.array(busy, dtype=float), batch) == samples


# --- the device's work, and whose device it is ---


@pytest.mark.parametrize(
    ("sample", "healthy"),
    [
        ("npu/strided_copies_transdata", "npu/healthy"),
        ("ipu/strided_copies", "ipu/healthy"),
        ("ipu/offload_stream_copies", "ipu/healthy"),
    ],
)
def test_copies_modelled_apart_are_no_compute(stripped, sample, healthy):
    """Layout copies and remote-buffer copies have parts of their own in the emulator: the same model's compute
    a step with them is the one without."""
    work = fitting.work_per_step(*stripped(sample))
    assert work == pytest.approx(fitting.work_per_step(*stripped(healthy)), rel=0.01)


def test_a_replicated_fits_compute_leaves_out_the_reductions_and_the_update_they_cost():
    """Each step the emulator reduces the gradients and updates the weights (three passes over them in memory): the
    compute fitted is the device's work without the all-reduces, less that update."""
    trace, scope = _analysed(SAMPLES / "jobs" / "npu_exposed_allreduce" / "rank0.trace.json.gz")
    config = fit(trace, scope)
    assert config.replicas is not None and config.replicas.count == 8
    update = 3 * config.workload.weights * 1e6 / config.profile.memory_bandwidth
    compute = fitting._device_work(trace, scope, True) / scope.steady_steps - update
    assert config.workload.gflops_per_sample == pytest.approx(_per_sample(config, compute), rel=1e-9)
    replicated = fitting._device_work(trace, scope, True)
    assert fitting.work_per_step(trace, scope) * scope.steady_steps > replicated  # the reductions counted in


def test_the_device_model_is_the_fitted_familys_only(analysed):
    """A trace naming an H100 is fitted as one on a GPU; fitted as another family, its own reference figures."""
    trace, scope = analysed(eager_steps(5, ops=4, kernel_us=200))
    assert fit(trace, scope).device_model == "H100-SXM5-80GB"
    assert fit(trace, scope, device="npu").device_model == "generic"


def test_a_compile_in_the_steady_state_with_a_full_last_step_is_one_sample_short(analysed):
    """A compile after warm-up is modelled as a short last batch; where the trace's last step computes a full
    batch, the short one is a sample short."""
    document = eager_steps(5, ops=4, kernel_us=200, steps=8)
    document["traceEvents"].append(span("compile_inner (dynamo_timed)", 100, 1, 3 * 1000.0, 5, "cpu_op"))
    trace, scope = analysed(document)
    assert scope.metrics["recompilations.count"] == 1
    config = fit(trace, scope)
    assert config.knobs.batch_size == fitting.RECOMPILE_BATCH
    assert config.workload.last_batch_samples == fitting.RECOMPILE_BATCH - 1


# --- gradients: what is and is not data parallelism ---


@pytest.mark.parametrize("gloo", [False, True], ids=["launches alone", "a host thread's own"])
def test_all_reduces_on_the_host_are_no_replicas(analysed, gloo):
    """The emulator's replicas reduce on the device: neither launches without device kernels nor collectives a
    host thread runs itself (gloo) are what it models."""
    document = kineto_job(steps=8, host_args=ARGS)
    document["traceEvents"] = [e for e in document["traceEvents"] if not e["name"].startswith("ncclDevKernel")]
    if gloo:
        document["traceEvents"] += [
            span("gloo:all_reduce", 100, 1, i * 1000.0 + 30, 300, "cpu_op", ARGS) for i in range(8)
        ]
    trace, scope = analysed(document)
    assert [c.name for c in scope.metrics.communication.collectives] == (["all_reduce"] if gloo else [])
    assert fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ()) is None


def test_input_copies_are_no_compute_replicated_or_not(analysed):
    plain = kineto_job(steps=8, host_args=ARGS)
    copying = kineto_job(steps=8, host_args=ARGS)
    copy = "Memcpy HtoD (Pinned -> Device)"
    copying["traceEvents"] += [span(copy, 0, 8, i * 1000.0 + 850, 100, "gpu_memcpy") for i in range(8)]
    for replicated in (True, False):
        work = [fitting._device_work(*analysed(document), replicated) for document in (plain, copying)]
        assert work[0] == work[1]


def test_an_all_reduce_every_other_step_is_no_replicas(analysed):
    """The emulator's replicas reduce every step: gradients accumulated over two steps are not what it models."""
    document = kineto_job(steps=8, host_args=ARGS)
    kernels = [e for e in document["traceEvents"] if e["name"].startswith("ncclDevKernel")]
    document["traceEvents"] = [e for e in document["traceEvents"] if e not in kernels[1::2]]
    trace, scope = analysed(document)
    assert fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ()) is None


def test_only_the_windows_all_reduces_say_the_bucket(analysed):
    """Other collectives, and all-reduces outside the analysis window, leave the bucket and bandwidth alone."""
    document = kineto_job(steps=8, host_args=ARGS)
    gather = ARGS | {"Collective name": "allgather", "In msg nelems": 100_000_000, "Out msg nelems": 100_000_000}
    nccl = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    for step in range(8):
        document["traceEvents"] += [span("record_param_comms", 100, 1, step * 1000.0 + 850, 10, "cpu_op", gather),
                                    span(nccl, 0, 13, step * 1000.0 + 860, 100, "kernel")]  # fmt: skip
    late = ARGS | {"In msg nelems": 200_000_000, "Out msg nelems": 200_000_000}
    document["traceEvents"] += [span("record_param_comms", 100, 1, 9000.0, 10, "cpu_op", late),
                                span(NCCL, 0, 13, 9010.0, 50, "kernel")]  # fmt: skip
    trace, scope = analysed(document)
    gradients = fitting._gradients(scope, PROFILES["gpu"], scope.steady_steps, ())
    assert gradients is not None and gradients.replicas["bucket"] == 100_000_000 and gradients.bytes == 100e6
    latency = PROFILES["gpu"].collective_latency_us
    assert gradients.replicas["bus_bandwidth"] == pytest.approx(100e6 * 1.5 / (300 - latency) / 1e3, rel=1e-9)


def _copied(copy_from: float, copy_to: float) -> dict:
    """Steps of 2 ms: a 600 µs kernel, and an input copy from ``copy_from`` to ``copy_to`` µs into the step."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    for step in range(8):
        t = step * 2000.0
        events += [span(f"ProfilerStep#{step}", 100, 1, t, 1999, "user_annotation"),
                   span("gemm", 0, 7, t, 600, "kernel")]  # fmt: skip
        if copy_to > copy_from:
            events.append(
                span("Memcpy HtoD (Pinned -> Device)", 0, 8, t + copy_from, copy_to - copy_from, "gpu_memcpy")
            )
    return {"traceEvents": events}


@pytest.mark.parametrize(
    ("copy", "tiles"),
    [((100, 500), 1), ((550, 1050), None), ((500, 700), None), ((0, 0), None)],
    ids=["hidden", "a tenth hidden", "half hidden", "none"],
)
def test_io_tiles_where_most_of_the_copies_hide_behind_compute(analysed, copy, tiles):
    """On an IPU copies overlap compute only through IO tiles: a trace whose copies mostly do had some, at least
    one; on a device with DMA engines, none."""
    trace, scope = analysed(_copied(*copy))
    knobs = fitting._graphs_and_tiles(scope, PROFILES["ipu"], 0, False)
    assert knobs.get("io_tiles") == tiles and "device_graphs" not in knobs
    assert fitting._graphs_and_tiles(scope, PROFILES["gpu"], 0, True) == {"device_graphs": False}


def test_a_trace_without_input_copies_copies_a_byte_a_sample(analysed):
    trace, scope = analysed(_copied(0, 0))
    assert fitting._sample_bytes(scope, PROFILES["gpu"].h2d_bandwidth, scope.steady_steps, 1) == 1
    trace, scope = analysed(_copied(100, 500))  # 400 µs a step at the link's bandwidth
    copied = fitting._sample_bytes(scope, PROFILES["gpu"].h2d_bandwidth, scope.steady_steps, 4)
    assert copied == int(400 * PROFILES["gpu"].h2d_bandwidth / 1e6 / 4)


def test_one_steady_step_must_sync_itself(analysed):
    assert _waits_each_step(analysed, _synced_steps(steps=1))
    assert not _waits_each_step(analysed, _synced_steps(steps=1, skip=(0,)))


# --- compiles, CPU fallbacks, pageable copies, the host's spread ---


def _host_steps(
    host_us: list[float], compiles: list[tuple[float, float]] = (), first_us: float = 1000.0, step_us: float = 1000.0
) -> dict:
    """Steps of ``step_us`` (the first ``first_us``), each an op of ``host_us[i]`` on the host at its start and a
    500 µs kernel ending 100 µs before the step does; compiles at (start, duration) µs."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    for step, busy in enumerate(host_us):
        t, length = (0.0, first_us) if step == 0 else (first_us + (step - 1) * step_us, step_us)
        events += [span(f"ProfilerStep#{step}", 100, 1, t, length - 1, "user_annotation"),
                   span("aten::linear", 100, 1, t + 1, busy, "cpu_op"),
                   span("gemm", 0, 7, t + length - 600, 500, "kernel")]  # fmt: skip
    events += [span("compile_inner (dynamo_timed)", 100, 2, at, dur, "cpu_op") for at, dur in compiles]
    return {"traceEvents": events}


WARMED_UP = [(10.0, 50.0)]  # a compile in the first, longer step: it warms up


@pytest.mark.parametrize(
    ("host_us", "spread"),
    [
        ([100, 150, 160, 170, 180, 190, 200, 210, 220], fitting.spread([150, 160, 170, 180, 190, 200, 210, 220])),
        ([100, 100, 300, 100, 300, 100, 300], fitting.MAX_HOST_JITTER),
        ([100, 180, 200], fitting.spread([180, 200])),
        ([100, 150], 0.0),
    ],
    ids=["steady steps", "capped", "two steady steps", "one"],
)
def test_the_hosts_spread_is_its_own_time_over_the_steady_steps(analysed, host_us, spread):
    trace, scope = analysed(
        _host_steps(host_us, WARMED_UP, first_us=7000.0, step_us=5000.0)
    )  # gaps past untraced Python
    assert scope.steps.warmup == 1 and scope.steady_steps == len(host_us) - 1
    assert fitting._host_spread(trace, scope) == pytest.approx(spread)


@pytest.mark.parametrize(
    ("compiles", "graph_compile_ms"),
    [
        ([(10.0, 400.0), (450.0, 500.0)], 0.45),  # warm-up's only: their mean
        ([(10.0, 500.0)], 0.5),
        ([(10.0, 50.0), (3000.0, 300.0), (5000.0, 400.0)], 0.7),  # the steady state's together
        ([(10.0, 50.0), (2000.0, 300.0)], 0.3),  # at the steady state's first instant
        ([(10.0, 50.0), (3000.0, 0.1)], 0.001),
        ([(10.0, 50.0), (3000.0, 300.0), (3010.0, 200.0), (3020.0, 100.0)], 0.3),  # phases inside one compile: once
        ([], None),
    ],
)
def test_the_compile_time_fitted(analysed, compiles, graph_compile_ms):
    trace, scope = analysed(_host_steps([100] * 8, compiles, first_us=2000.0))
    assert scope.lo == 2000.0 or not compiles
    assert fitting._compiles(scope).get("graph_compile_ms") == (pytest.approx(graph_compile_ms) if compiles else None)


def _falling_back(copies_us: float, ops: tuple[str, str] = ("digamma", "digamma")) -> dict:
    """Steps of 1 ms with two ops a step that fall back to the host CPU (``ops``), each copying its input back for
    ``copies_us``."""
    document = _host_steps([50] * 8)
    for step in range(8):
        t = step * 1000.0
        for k, op in enumerate(ops):
            fallback = span(f"aten::{op} (CPU fallback)", 100, 1, t + 60 + 150 * k, 100 + 20 * k, "cpu_op")
            document["traceEvents"].append(fallback)
            if copies_us:
                copy = "Memcpy DtoH (Device -> Pageable)"
                document["traceEvents"].append(span(copy, 0, 8, t + 100 + 150 * k, copies_us, "gpu_memcpy"))
    return document


@pytest.mark.parametrize("copies_us", [40.0, 0.0])
def test_cpu_fallbacks_are_fitted_their_calls_host_time_and_copies(analysed, copies_us):
    trace, scope = analysed(_falling_back(copies_us))
    profile = PROFILES["gpu"]
    (fallback,) = fitting._fallbacks(trace, scope, profile, scope.steady_steps)
    tensor = int(copies_us * profile.d2h_bandwidth / 1e6) if copies_us else 1  # a byte where nothing is copied
    assert fallback == {"op": "digamma", "host_us": 110.0, "tensor_size": tensor, "calls_per_step": 2}
    assert fitting._fallbacks(trace, scope, PROFILES["npu"], scope.steady_steps) == []  # no such knob there


def test_each_op_that_falls_back_is_fitted_apart(analysed):
    """Their host times and calls each their own; the copies back, which do not say whose they are, shared."""
    trace, scope = analysed(_falling_back(40.0, ("digamma", "lgamma")))
    profile = PROFILES["gpu"]
    fallbacks = fitting._fallbacks(trace, scope, profile, scope.steady_steps)
    tensor = int(40.0 * profile.d2h_bandwidth / 1e6)
    assert fallbacks == [
        {"op": "digamma", "host_us": 100.0, "tensor_size": tensor, "calls_per_step": 1},
        {"op": "lgamma", "host_us": 120.0, "tensor_size": tensor, "calls_per_step": 1},
    ]


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("CPU fallback digamma : self=HPUBFloat16Type", "digamma"),  # Gaudi's
        ("aten::digamma (CPU fallback)", "digamma"),
        ("CPU fallback", "op"),  # a name that says no more
    ],
)
def test_a_fallback_is_named_after_its_op(name, op):
    assert fitting._fallback_op(name) == op


@pytest.mark.parametrize(
    ("name", "copy", "pageable"),
    [
        ("Memcpy HtoD (Pageable -> Device)", (920, 990), True),
        ("Memcpy HtoD (Pinned -> Device)", (920, 990), False),
        ("Memcpy HtoD (Pageable -> Device)", (450, 850), False),  # mostly hidden behind compute
        ("Memcpy DtoH (Device -> Pageable)", (920, 990), False),  # no input
        ("Memcpy HtoD (Pageable -> Device)", (850, 951), False),  # half hidden
    ],
)
def test_input_copies_from_pageable_memory_that_run_apart(analysed, name, copy, pageable):
    document = _host_steps([50] * 8)
    for step in range(8):
        start, end = copy
        document["traceEvents"].append(span(name, 0, 8, step * 1000.0 + start, end - start - 1, "gpu_memcpy"))
    trace, scope = analysed(document)
    assert fitting._pageable(trace, scope) is pageable


@pytest.mark.parametrize(
    ("copies", "pageable"),
    [
        (["Memcpy HtoD (Host -> Device)"], True),  # the call blocks to copy input in
        (["Memcpy DtoH (Device -> Host)"], False),  # it reads results back: nothing of the input's memory
        (["Memcpy DtoH (Device -> Host)", "Memcpy DtoD (Device -> Device)"], False),  # the device's own copy beside
        (["Memcpy DtoH (Device -> Host)", "Memcpy HtoD (Host -> Device)"], True),
        ([], True),  # a copy the trace does not show: either way
    ],
)
def test_a_call_that_blocks_to_read_results_back_says_nothing_of_the_input_s_memory(analysed, copies, pageable):
    """hipMemcpyWithStream blocks whichever way it copies: only one copying to the device is an input copy."""
    document = _host_steps([50] * 8)
    for step in range(8):
        at = step * 1000.0 + 920
        document["traceEvents"].append(span("hipMemcpyWithStream", 100, 1, at, 70, "cuda_runtime"))
        document["traceEvents"] += [
            span(copy, 0, 8, at + 10 + 20 * i, 15, "gpu_memcpy") for i, copy in enumerate(copies)
        ]
    trace, scope = analysed(document)
    assert fitting._pageable(trace, scope) is pageable


def test_batches_loaded_in_process_are_the_single_process_loaders_not_waits_for_workers(analysed):
    document = eager_steps(20, ops=4, kernel_us=100)
    markers = [e for e in document["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    waits = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    document["traceEvents"] += [span(waits, 100, 1, marker["ts"], 15, "user_annotation") for marker in markers]
    assert loading_per_batch(*analysed(document)) is None
