"""XLA's ops given FLOPs and bytes from their programs' HLO (``hlo.proto``'s schema, encoded field by field by
``bench/xspace_synth.py``): GEMMs by their dots' dimension numbers, library GEMMs and convolutions, pointwise and
reduction fusions; programs told apart by id; and the roofline and rules of an XLA capture that holds them."""

from __future__ import annotations

import json
import shutil

import pytest
from builders import xla_space
from conftest import DATA, complete, process_name, thread_name
from xspace_synth import (
    BF16,
    F32,
    computation,
    fusion_program,
    gemm_config,
    hlo,
    instruction,
    message,
    number,
    packed,
    shape,
)

from perftool.dialects import hlo as hlo_model
from perftool.dialects.hlo import PROGRAMS_FROM, Programs, capture_programs, program_ops, programs
from perftool.pipeline.read import load_trace
from perftool.roofline.figures import roofline
from perftool.trace import xspace

XSPACE = DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb"
ITS_JSON = DATA / "real" / "jax08_mi300x_attention_opbyop.trace.json.gz"


def dot_numbers(lhs_contracting, rhs_contracting, lhs_batch=(), rhs_batch=()) -> bytes:
    return message(30, packed(1, list(lhs_contracting)) + packed(2, list(rhs_contracting))
                   + packed(3, list(lhs_batch)) + packed(4, list(rhs_batch)))  # fmt: skip


def batched_gemm_fusion(element: int = BF16) -> bytes:
    """A fusion of a batched dot [4,256,64] x [4,64,128] → [4,256,128] (and a scaling after it)."""
    lhs, rhs, out = shape(element, 4, 256, 64), shape(element, 4, 64, 128), shape(element, 4, 256, 128)
    fused = computation(
        "fused_dot", 2,
        instruction("p0", "parameter", lhs, 1), instruction("p1", "parameter", rhs, 2),
        instruction("dot.1", "dot", out, 3, (1, 2), extra=dot_numbers([2], [1], [0], [0])),
        instruction("multiply.1", "multiply", out, 4, (3, 3)),
        fused=True,
    )  # fmt: skip
    entry = computation(
        "main", 1,
        instruction("a", "parameter", lhs, 1), instruction("b", "parameter", rhs, 2),
        instruction("gemm_fusion_dot.1", "fusion", out, 3, (1, 2), (2,)),
    )  # fmt: skip
    return hlo(fused, entry)


def test_a_fused_dot_is_a_gemm_of_2mnk_per_product_moving_its_operands_and_result_once():
    (op,) = program_ops(batched_gemm_fusion()).values()
    assert op.work.family == "gemm" and op.work.dtype == "bf16"
    assert op.work.mnk == (256, 128, 64)
    assert op.work.flops == 2 * 4 * 256 * 128 * 64
    assert op.work.bytes == 2 * (4 * 256 * 64 + 4 * 64 * 128 + 4 * 256 * 128)
    assert op.work.out_shape == (4, 256, 128) and op.shapes == "4x256x64, 4x64x128"
    assert not op.fast_fp32  # bf16: not fp32 maths at all


def library_gemm(precision: bytes = b"") -> bytes:
    """hipBLASLt's and cuBLAS's GEMM call [512,1024] x [1024,256] in fp32, its dimension numbers in its JSON config."""
    result = shape(0, parts=(shape(F32, 512, 256), shape(6, 4096)))  # the product and its workspace
    entry = computation(
        "main", 1,
        instruction("a", "parameter", shape(F32, 512, 1024), 1),
        instruction("b", "parameter", shape(F32, 1024, 256), 2),
        instruction("custom-call.1", "custom-call", result, 3, (1, 2),
                    extra=message(28, "__cublas$lt$matmul") + gemm_config(1, 0) + precision),
    )  # fmt: skip
    return hlo(entry)


def test_a_library_gemm_reads_its_sizes_from_its_backend_config_and_its_precision_from_the_hlo():
    (op,) = program_ops(library_gemm()).values()
    assert op.work.family == "gemm" and op.work.mnk == (512, 256, 1024)
    assert op.work.flops == 2 * 512 * 256 * 1024
    assert op.work.bytes == 4 * (512 * 1024 + 1024 * 256 + 512 * 256 + 4096 // 4)  # the workspace is written too
    assert op.fast_fp32  # DEFAULT precision: the backend may run it in TF32
    highest = message(51, packed(1, [2, 2]))  # PrecisionConfig.operand_precision = HIGHEST, HIGHEST
    (exact,) = program_ops(library_gemm(highest)).values()
    assert not exact.fast_fp32 and exact.work.dtype == "fp32"


NHWC_HWIO = message(16, number(7, 0) + number(8, 3) + packed(11, [1, 2]) + number(3, 2) + number(4, 3)
                   + packed(6, [0, 1]) + number(9, 0) + number(10, 3) + packed(12, [1, 2]))  # fmt: skip


def convolution_program(source, kernel, result, extra=b"", opcode="convolution") -> bytes:
    """A program of one convolution, NHWC input, HWIO kernel (``extra``: its window, its batch groups)."""
    entry = computation(
        "main", 1,
        instruction("x", "parameter", shape(BF16, *source), 1), instruction("w", "parameter", shape(BF16, *kernel), 2),
        instruction("convolution.1", opcode, shape(BF16, *result), 3, (1, 2), extra=NHWC_HWIO + extra),
    )  # fmt: skip
    return hlo(entry)


def test_a_convolution_without_a_window_counts_every_kernel_tap():
    (op,) = program_ops(convolution_program((8, 32, 32, 16), (3, 3, 16, 64), (8, 32, 32, 64))).values()
    assert op.work.family == "conv"
    assert op.work.flops == 2 * (8 * 32 * 32 * 64) * (3 * 3 * 16)


def test_a_filter_gradient_s_batch_groups_split_its_batch():
    """batch_group_count 4 (a filter gradient's form): output batch 8 / 4, each output element over its group's
    4 input features and 3 x 3 valid taps of each of 8 x 8 positions: the FLOPs XLA counts for the same convolution
    (``conv2d_batch_grouped`` below, as XLA's CPU backend rewrites it)."""
    valid = message(15, b"".join(message(1, number(1, 3) + number(2, 1)) for _ in range(2)))  # two 3-wide, stride 1
    program = convolution_program((8, 10, 10, 4), (3, 3, 4, 4), (2, 8, 8, 4), valid + number(58, 4))
    (op,) = program_ops(program).values()
    assert op.work.flops == 2 * 2 * 4 * 4 * (8 * 3) ** 2 == 36_864


XLA_PROGRAMS = DATA / "hlo"  # jitted by jax on the CPU, with the FLOPs XLA's own cost analysis counts (make.py)


@pytest.mark.parametrize("name", sorted(json.loads((XLA_PROGRAMS / "xla_flops.json").read_text())))
def test_gemm_and_convolution_flops_are_xla_s_own_count(name):
    """Padding, strides, dilations of the input or the kernel, feature and batch groups: the FLOPs XLA's cost analysis
    gives each program (its only arithmetic a dot or a convolution)."""
    expected = json.loads((XLA_PROGRAMS / "xla_flops.json").read_text())[name]
    ops = program_ops((XLA_PROGRAMS / f"{name}.hlo_proto.pb").read_bytes())
    matrix = [op.work for op in ops.values() if op.work.family in ("gemm", "conv")]
    assert len(matrix) == 1 and matrix[0].flops == expected


def test_other_fusions_are_pointwise_a_flop_an_element_written_or_reductions_a_flop_an_element_read():
    (pointwise,) = program_ops(fusion_program(("exp.1", "exponential"), ("add.1", "add"))).values()
    assert pointwise.work.family == "elementwise" and pointwise.work.flops == 1024 * 512
    assert pointwise.work.bytes == 2 * 2 * 1024 * 512
    (moves,) = program_ops(fusion_program(("transpose.1", "transpose"), ("copy.1", "copy"))).values()
    assert moves.work.family == "elementwise" and moves.work.flops == 0  # a copy is no link of a pointwise chain
    (reduction,) = program_ops(fusion_program(("reduce.1", "reduce"), out=(1024,))).values()
    assert reduction.work.family == "reduction" and reduction.work.flops == 1024 * 512


def test_programs_are_told_apart_by_id_and_by_name_only_where_their_ops_agree():
    found = programs([("jit_step(7)", batched_gemm_fusion()), ("jit_step(9)", batched_gemm_fusion(F32)),
                      ("jit_other(3)", batched_gemm_fusion())])  # fmt: skip
    assert found.op("jit_step", "gemm_fusion_dot.1", 7).work.dtype == "bf16"
    assert found.op("jit_step", "gemm_fusion_dot.1", 9).work.dtype == "fp32"
    assert found.op("jit_step", "gemm_fusion_dot.1", None) is None and found.ambiguous("jit_step", "gemm_fusion_dot.1")
    assert found.op("jit_other", "gemm_fusion_dot.1", None).work.dtype == "bf16"
    twins = programs([("jit_step(1)", batched_gemm_fusion()), ("jit_step(2)", batched_gemm_fusion())])
    assert not twins.ambiguous("jit_step", "gemm_fusion_dot.1")  # compiled twice alike: either is right
    assert twins.op("jit_step", "gemm_fusion_dot.1", None) is not None


@pytest.mark.parametrize("cut", [1, 7, 40])
def test_a_program_that_does_not_decode_has_no_ops(cut):
    found = Programs()
    found.add("jit_step(1)", batched_gemm_fusion()[:-cut])
    assert found.ops(1) == {} and found.op("jit_step", "gemm_fusion_dot.1", 1) is None


def test_only_what_names_a_program_is_one_and_programs_decode_when_asked_for(monkeypatch):
    found = Programs()
    found.add("not a program name", batched_gemm_fusion())
    assert not found
    decoded = []
    monkeypatch.setattr(hlo_model, "program_ops", lambda proto: decoded.append(proto) or {})
    found.add("jit_step(1)", b"one")
    found.add("jit_step(2)", b"two")
    assert found and decoded == []
    found.op("jit_step", "fusion", 2)
    assert decoded == [b"two"]


POINTWISE = ("exp.1", "exponential"), ("add.1", "add")


def test_the_metadata_plane_s_programs_are_read_from_the_xspace(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(xla_space([("jit_step", "the_fusion", 5)], {"jit_step(5)": fusion_program(*POINTWISE)}))
    assert [name for name, _ in xspace.hlo_protos(str(path))] == ["jit_step(5)"]
    found = capture_programs(str(path), {})
    assert found.op("jit_step", "the_fusion", 5).work.flops == 1024 * 512


def test_pointwise_kernels_of_separate_programs_chain_but_a_program_s_own_fusions_do_not(tmp_path, run):
    """Op by op, each jnp operation is a program of its own: three pointwise ones in a row are a chain to fuse under
    one jax.jit. Three fusions of one program are what XLA chose to keep apart: no chain."""
    cases = {
        "apart": ([(f"jit_op{k}", "the_fusion", k) for k in range(3)],
                  {f"jit_op{k}({k})": fusion_program(*POINTWISE) for k in range(3)}),
        "one": ([("jit_step", f"fusion.{k}", 1) for k in range(3)],
                {"jit_step(1)": fusion_program(*POINTWISE, names=("fusion.0", "fusion.1", "fusion.2"))}),
    }  # fmt: skip
    findings = {}
    for name, (kernels, protos) in cases.items():
        path = tmp_path / f"{name}.xplane.pb"
        path.write_bytes(xla_space(kernels, protos))
        result = run("scan", str(path), "--format", "json", "--fail-on", "never", "--select", "PT018")
        assert result.exit_code == 0, result.output
        findings[name] = json.loads(result.stdout)["traces"][0]["findings"]
    (chain,) = findings["apart"]
    assert "jax.jit" in chain["fix"]["text"] and "torch" not in chain["fix"]["text"]
    assert findings["one"] == []


def test_the_real_capture_s_ops_are_modelled_from_its_xspace_and_from_its_export_beside_it():
    """jax 0.8 on an MI300X, op by op: jit_matmul compiled five times (five shapes), its kernels told apart by
    program id in the XSpace, by the XSpace beside the JSON export."""
    by_space = roofline(load_trace(str(XSPACE)))
    by_export = roofline(load_trace(str(ITS_JSON)))
    assert by_space.modelled_share > 0.95
    assert by_export.flops == pytest.approx(by_space.flops) and by_export.modelled_us == by_space.modelled_us
    gemm = [op for op in by_space.ops if op.family == "gemm" and op.shapes == "8192x1024, 1024x1024"]
    assert gemm and gemm[0].flops == gemm[0].calls * 2 * 8192 * 1024 * 1024 and gemm[0].dtype == "bf16"
    assert not by_space.notes


def test_an_export_alone_says_where_its_programs_are_and_what_goes_unjudged(tmp_path, run):
    """Among the roofline's notes (info says it once) and the scanned trace's caveats; beside its XSpace the export
    says nothing of it."""
    alone = tmp_path / "worker.trace.json.gz"
    shutil.copy(ITS_JSON, alone)
    found = roofline(load_trace(str(alone)))
    assert found.modelled_us == 0 and len(found.notes) == 2  # and the JSON alone names no device model
    assert "scan worker.xplane.pb, or keep it beside this file" in found.notes[0]
    assert found.notes[1].startswith("the trace does not name its device's model ('/device:GPU:0' says only where")
    assert "the capture's XSpace names it (scan worker.xplane.pb, or keep it beside this file)" in found.notes[1]
    caveats = json.loads(run("scan", str(alone), "--format", "json").stdout)["traces"][0]["caveats"]
    assert [c for c in caveats if "XLA's kernels record no shapes" in c] == found.notes[:1]
    assert "no rule that reads what an op computes" in found.notes[0]
    info = " ".join(run("info", str(alone)).output.split())
    assert info.count("XLA's kernels record no shapes") == 1
    beside = json.loads(run("scan", str(ITS_JSON), "--format", "json").stdout)["traces"][0]["caveats"]
    assert not any("record no shapes" in c for c in beside)


@pytest.mark.parametrize(
    ("kernel_args", "told"),
    [({"correlation_id": "1", "tf_op": "sequential/dense/MatMul:MatMul"}, "TensorFlow ran the device's kernels "
      "without XLA (jit_compile): they name no compiled program"),
     ({"correlation_id": "1", "hlo_module": "a_inference_train_step_907__.12", "hlo_op": "dot.3"},
      "XLA's kernels record no shapes: what each computes is in its program's HLO")],
    ids=["without XLA", "with XLA"],
)  # fmt: skip
def test_a_tensorflow_capture_without_programs_says_whether_its_kernels_came_from_xla(write_trace, kernel_args, told):
    """A TensorFlow graph run without jit_compile launches TensorFlow's own kernels, which name no XLA program: no
    XSpace holds what they compute. Kernels that name their program were compiled by XLA, whose HLO the XSpace
    keeps."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), process_name(1, "/device:GPU:0"),
              thread_name(1, 16, "Stream #16(Kernel)")]  # fmt: skip
    for step in range(4):
        t = step * 1000.0
        events += [complete("train", t, 990, pid=701, tid=1, args={"step_num": str(step), "_r": "1"}),
                   complete("TFE_Py_ExecuteCancelable", t + 5, 900, pid=701, tid=1),
                   complete("volta_sgemm_128x64_nn", t + 100, 600, pid=1, tid=16, args=kernel_args)]  # fmt: skip
    found = roofline(load_trace(write_trace({"traceEvents": [*events, {}]})))
    assert found.notes[0].startswith(told)


def test_a_capture_of_the_host_alone_says_nothing_of_programs(run):
    """JAX on the CPU: no device work for a program to have computed, so its XSpace is not asked for."""
    caveats = json.loads(run("scan", str(DATA / "jax_cpu_train_recompile.trace.json.gz"), "--format", "json").stdout)
    assert not any("record no shapes" in c for c in caveats["traces"][0]["caveats"])


def test_an_xspace_without_its_programs_says_so(tmp_path, run):
    """An XSpace whose metadata plane holds no program's HLO names no other file to scan."""
    bare = tmp_path / "worker.xplane.pb"
    bare.write_bytes(xla_space([("jit_step", "the_fusion", 5)], {}))
    caveats = json.loads(run("scan", str(bare), "--format", "json").stdout)["traces"][0]["caveats"]
    assert any("this XSpace holds none of its programs' HLO" in c for c in caveats)


def test_an_export_whose_programs_are_not_told_apart_says_so(tmp_path):
    """Beside an XSpace without the program ids, the JSON export's kernels of jit_matmul's five programs have no
    model, and the note names them and the XSpace."""
    shutil.copy(XSPACE, tmp_path / "h.xplane.pb")
    protos = dict(xspace.hlo_protos(str(tmp_path / "h.xplane.pb")))
    (tmp_path / "h.xplane.pb").write_bytes(xla_space([("jit_matmul", "custom-call.1", 19)], protos, with_ids=False))
    shutil.copy(ITS_JSON, tmp_path / "h.trace.json.gz")
    found = roofline(load_trace(str(tmp_path / "h.trace.json.gz")))
    assert 0 < found.modelled_share < 0.5
    (note,) = [n for n in found.notes if "compiled more than once" in n]
    assert "jit_matmul" in note and "h.xplane.pb" in note


def test_the_real_capture_s_hand_written_gelu_is_a_chain_to_jit(run):
    result = run("scan", str(XSPACE), "--format", "json", "--fail-on", "never", "--select", "PT018")
    (finding,) = json.loads(result.stdout)["traces"][0]["findings"]
    assert "jit(integer_pow)/integer_pow → jit(multiply)/mul → jit(add)/add" in finding["message"]
    assert "jax.nn.gelu" in finding["fix"]["text"]


def test_a_negative_size_is_no_array_of_a_known_type_and_moves_nothing():
    (op,) = program_ops(fusion_program(*POINTWISE, rows=-4)).values()
    assert op.work.bytes == 0 and not op.work.dtype_recorded and op.work.flops <= 1


def test_a_convolution_library_call_is_the_convolution_it_runs():
    """XLA's GPU backends run a convolution as a call of cuDNN's or MIOpen's (``__cudnn$convForward``, its window
    and dimension numbers kept): the same FLOPs."""
    sizes = (8, 32, 32, 16), (3, 3, 16, 64), (8, 32, 32, 64)
    (plain,) = program_ops(convolution_program(*sizes)).values()
    (call,) = program_ops(convolution_program(*sizes, message(28, "__cudnn$convForward"), "custom-call")).values()
    assert call.work == plain.work


@pytest.mark.parametrize("program", ["attention", "gated", "softplus_gated"])
def test_attention_a_program_writes_out_is_found_by_its_dataflow(tmp_path, run, program):
    """jax's attention written out (einsum, jax.nn.softmax, einsum), its program's kernels run in its order: PT017
    finds the GEMM, softmax, GEMM chain in its HLO and gives JAX's fix; two GEMMs with a GELU or a softplus (an
    exponential, but no reduction over the keys) between are none."""
    proto = (XLA_PROGRAMS / f"{program}.hlo_proto.pb").read_bytes()
    kernels = [("jit_step", name, 1) for name in program_ops(proto)]
    path = tmp_path / "step.xplane.pb"
    path.write_bytes(xla_space(kernels, {"jit_step(1)": proto}))
    result = run("scan", str(path), "--format", "json", "--fail-on", "never", "--select", "PT017")
    assert result.exit_code == 0, result.output
    findings = json.loads(result.stdout)["traces"][0]["findings"]
    if program != "attention":
        assert findings == []
        return
    (finding,) = findings
    assert "2x4x128x128 score matrix" in finding["message"]
    values = finding["values"]  # each chain: the 8 kernels from the scores' GEMM to the values', 40 µs each
    assert values["chain_ms_per_step"] / values["per_step"] == pytest.approx(8 * 0.040)
    assert "jax.nn.dot_product_attention" in finding["fix"]["text"]


def test_a_tensorflow_program_s_attention_written_out_is_told_keras_s_way_to_a_fused_kernel(tmp_path, run):
    """The same chain in a program a tf.function compiled with XLA (its call as TensorFlow's profiler names it):
    TensorFlow has no fused kernel to call, so the fix is Keras's flash attention on its JAX backend, not
    PyTorch's scaled_dot_product_attention nor a jax.nn call the job cannot make."""
    proto = (XLA_PROGRAMS / "attention.hlo_proto.pb").read_bytes()
    kernels = [("a_inference_step_7__XlaMustCompile_true", name, 1) for name in program_ops(proto)]
    path = tmp_path / "step.xplane.pb"
    call = "EagerLocalExecute: __inference_step_7"
    path.write_bytes(xla_space(kernels, {"a_inference_step_7__XlaMustCompile_true(1)": proto}, host_call=call))
    result = run("scan", str(path), "--format", "json", "--fail-on", "never", "--select", "PT017")
    trace = json.loads(result.stdout)["traces"][0]
    (finding,) = trace["findings"]
    assert trace["framework"] == "tensorflow"
    fix = finding["fix"]["text"]
    assert "KERAS_BACKEND=jax" in fix and "enable_flash_attention" in fix
    assert "scaled_dot_product_attention" not in fix and "jax.nn" not in fix


def test_a_json_trace_naming_its_programs_by_number_is_modelled_as_by_text(tmp_path):
    """Another writer's JSON of the same events, ids as numbers (the exporter writes them as text), naming the XSpace
    its programs are in as an annotated trace does: the same FLOPs."""
    space_path = tmp_path / "step.xplane.pb"
    space_path.write_bytes(xla_space([("jit_op0", "the_fusion", 0)], {"jit_op0(0)": fusion_program(*POINTWISE)}))

    def numbered(e) -> dict:
        args = json.loads(bytes(e.args)) if bytes(e.args) else {}
        args = {k: int(v) if k in (xspace.PROGRAM_ID, "correlation_id") else v for k, v in args.items()}
        times = {k: v for k, v in (("ts", e.ts), ("dur", e.dur)) if v == v}  # NaN: none recorded
        return {"ph": e.ph, "pid": e.pid, "tid": e.tid, "name": e.name, **times, "args": args}

    events = [numbered(e) for batch in xspace.batches(str(space_path), {}) for e in batch]
    as_json = tmp_path / "elsewhere" / "step.json"
    as_json.parent.mkdir()
    as_json.write_text(json.dumps({"traceEvents": events, PROGRAMS_FROM: str(space_path)}))
    by_json, by_space = roofline(load_trace(str(as_json))), roofline(load_trace(str(space_path)))
    assert by_json.flops == by_space.flops > 0 and by_json.modelled_share == by_space.modelled_share == 1.0


def test_an_xla_capture_s_ops_add_up_by_name_scope(run):
    """Each op counted in its path's scope (``jit(matmul)`` of ``jit(matmul)/dot_general``): jit_matmul's five programs'
    18 kernels in one region, every modelled FLOP of an op with a scope in one, and the table titled by what it
    groups."""
    found = roofline(load_trace(str(XSPACE)))
    by_name = {region.name: region for region in found.regions}
    assert by_name["jit(matmul)"].calls == 18 and "jit(exp)" in by_name
    assert not any("/" in name for name in by_name)
    calls = found.calls
    scoped = calls.each(lambda kind: "/" in kind.name and kind.work is not None, bool)
    flops = calls.each(lambda kind: kind.work.flops if kind.work else 0.0, float)
    assert sum(region.flops for region in found.regions) == pytest.approx(float(flops[scoped].sum()))
    result = run("info", str(XSPACE))
    assert "By name scope" in result.output and "By annotation" not in result.output


def test_a_run_s_perfetto_copy_reads_its_programs_from_the_run_s_xspace(tmp_path):
    """jax.profiler's ``perfetto_trace.json.gz`` beside the run's one XSpace (of another name) is modelled as the
    export is: the XSpace beside is found as the device's properties are."""
    shutil.copy(XSPACE, tmp_path / "worker-3.xplane.pb")
    shutil.copy(ITS_JSON, tmp_path / "perfetto_trace.json.gz")
    found = roofline(load_trace(str(tmp_path / "perfetto_trace.json.gz")))
    assert found.modelled_share > 0.95


@pytest.mark.parametrize(("program", "forward", "backward"), [
    ("cudnn_attention_causal", 2 * 2 * 4 * 256 * 256 * (64 + 64) / 2, None),  # half the score matrix
    ("cudnn_attention_window", 2 * 2 * 4 * 256 * 64 * (64 + 64), None),  # 64 keys a query at most
    ("cudnn_attention_training", 2 * 2 * 4 * 256 * 256 * (64 + 64), 2 * 2 * 2 * 4 * 256 * 256 * (64 + 64)),
])  # fmt: skip
def test_cudnn_s_fused_attention_is_an_attention_over_the_score_matrix_its_config_names(program, forward, backward):
    """jax.nn.dot_product_attention(implementation="cudnn") as jax lowers it for an NVIDIA GPU ([2, 256, 4, 64] bf16
    q, k, v): its forward call 2·B·N·T·S·(E + Ev) FLOPs, causal or windowed the keys each query sees, its backward
    call twice the forward; each moves its operands and results once."""
    ops = program_ops((XLA_PROGRAMS / f"{program}.hlo_proto.pb").read_bytes())
    by_pass = {name.split(".")[0]: op.work for name, op in ops.items()}
    found = by_pass["dot_product_attention_fwd"]
    assert found.family == "attention" and found.dtype == "bf16" and found.flops == forward
    assert found.out_shape == (2, 4, 256, 64)
    assert found.bytes >= 4 * 2 * (2 * 256 * 4 * 64)  # q, k, v read, the output written
    if backward is None:
        assert "dot_product_attention_bwd" not in by_pass
    else:
        assert by_pass["dot_product_attention_bwd"].flops == backward


def test_a_capture_s_cudnn_attention_kernels_are_attention_on_the_roofline(tmp_path, run):
    """The training program's two cuDNN calls, each a kernel of 40 µs a step: the roofline's attention (its matrix
    peak), the program's FLOPs each step, and no unfused attention to report."""
    proto = (XLA_PROGRAMS / "cudnn_attention_training.hlo_proto.pb").read_bytes()
    calls = [name for name in program_ops(proto) if name.startswith("dot_product_attention")]
    path = tmp_path / "step.xplane.pb"
    path.write_bytes(xla_space([("jit_loss", name, 1) for name in calls], {"jit_loss(1)": proto}))
    found = roofline(load_trace(str(path)))
    assert {op.family for op in found.ops} == {"attention"} and found.modelled_share == 1.0
    assert sum(op.flops / op.calls for op in found.ops) == 3 * 2 * 2 * 4 * 256 * 256 * (64 + 64)
    result = run("scan", str(path), "--format", "json", "--fail-on", "never", "--select", "PT017")
    assert result.exit_code == 0 and json.loads(result.stdout)["traces"][0]["findings"] == []


def test_a_program_named_with_an_id_past_a_uint64_is_passed_over():
    """MODULE(ID) names a program by its uint64 id: a name of longer digits (or past the 4,300 Python converts) is
    no program's, never a traceback."""
    found = programs([("jit_f(" + "9" * 5_000 + ")", b""), ("jit_f(" + "9" * 21 + ")", b""), ("jit_f(7)", b"")])
    assert list(found.protos) == [7] and found.by_name == {"jit_f": [7]}
