"""What each op of an XLA program computes and moves, and what each of its collectives moves, from the program's HLO.

XLA's kernels record no shapes: each names, in its args, its program (``hlo_module``, and in an XSpace its
``program_id``) and the op of the program it runs (``hlo_op``: a fusion, a library GEMM, a copy). The programs are in
the capture: jax.profiler keeps each one's ``HloProto`` in the XSpace's ``/host:metadata`` plane (an event per program,
named ``MODULE(ID)``, holding it as its ``Hlo Proto`` stat), and XProf writes them beside it as
``MODULE(ID).hlo_proto.pb``. Decoded here by the schema of xla's ``hlo.proto`` (``HloProto.hlo_module`` → computations
→ instructions, each with its shape by ``xla_data.proto``).

An op computing a dot is a GEMM (2·M·N·K for each of its batch's products, by the dot's dimension numbers), one
computing a convolution a convolution (2 FLOPs per output element per input feature of its group and kernel tap that
falls on the input, not its padding: XLA's own cost analysis's count); a library GEMM (``__cublas$gemm``,
hipBLASLt's ``__cublas$lt$matmul``) the same from its operands and the dimension numbers of its backend config;
cuDNN's fused attention (``__cudnn$fmha*``, jax.nn.dot_product_attention's cudnn implementation) an attention over the
score matrix its backend config names; any other fusion a reduction where it reduces (a FLOP per element read) and
pointwise otherwise (a FLOP per element written, none where it only moves data). Every op reads its operands and
writes its results once.

A collective (an NCCL or RCCL call on a GPU) moves its operands, an all-gather each rank's piece to every rank; its
group's ranks are in the instruction, written as each of XLA's releases writes them (:func:`_group_ranks`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec
import numpy as np

from perftool.common.errors import TraceError
from perftool.common.paths import names_file
from perftool.dialects.op_families import Work
from perftool.trace.model import Trace
from perftool.trace.profiler_dirs import XSPACE_SUFFIX, xspace_beside
from perftool.trace.xspace import (
    PROGRAM_ID,
    MalformedProtobuf,
    ProtoFields,
    device_programs,
    hlo_protos,
    int_field,
    message,
    packed_ints,
    text_field,
)

# xla_data.proto's PrimitiveType: the dtype a device's peak is quoted in, and bytes per element
ELEMENT_TYPES: dict[int, tuple[str, float]] = {
    1: ("bool", 1), 2: ("int8", 1), 3: ("int16", 2), 4: ("int32", 4), 5: ("int64", 8), 6: ("uint8", 1),
    7: ("uint16", 2), 8: ("uint32", 4), 9: ("uint64", 8), 10: ("fp16", 2), 11: ("fp32", 4), 12: ("fp64", 8),
    15: ("complex64", 8), 16: ("bf16", 2), 18: ("complex128", 16), 19: ("fp8", 1), 20: ("fp8", 1), 21: ("int4", 0.5),
    22: ("uint4", 0.5), 23: ("fp8", 1), 24: ("fp8", 1), 25: ("fp8", 1), 28: ("fp8", 1),
}  # fmt: skip
LIBRARY_GEMM = re.compile(r"^__cublas\$|^__hipblaslt\$|gemm|matmul", re.IGNORECASE)  # custom-call targets
LIBRARY_CONV = re.compile(r"^__cudnn\$conv|^__miopen\$conv", re.IGNORECASE)
LIBRARY_ATTENTION = re.compile(r"^__cudnn\$fmha", re.IGNORECASE)  # cuDNN's fused attention, forward and backward
CAUSAL_MASKS = frozenset({"CAUSAL", "PADDING_CAUSAL"})  # the backend config's mask types that hide the future keys
NO_ARITHMETIC = frozenset({
    "parameter", "constant", "bitcast", "copy", "transpose", "broadcast", "reshape", "slice", "dynamic-slice",
    "dynamic-update-slice", "concatenate", "pad", "tuple", "get-tuple-element", "iota", "gather", "reverse",
    "bitcast-convert",
})  # fmt: skip  # a fusion of these only moves data
PROGRAM_NAME = re.compile(r"^(.*)\((\d{1,20})\)$")  # MODULE(ID) (a uint64), as the metadata plane and XProf names them
HLO_FILE_SUFFIX = ".hlo_proto.pb"  # XProf's file of one program's HloProto, MODULE(ID).hlo_proto.pb
# the top-level key of an annotated trace (``scan --format perfetto``) naming the XSpace its programs are in
PROGRAMS_FROM = "perftool.xla_programs"
DEFAULT_PRECISION = 0  # xla_data.proto's PrecisionConfig.Precision: DEFAULT lets the backend use TF32 for fp32
# The collectives an HLO program runs (each as a library call, NCCL's or RCCL's on a GPU), the start of an asynchronous
# one holding its operands; the gathers' operands are each rank's piece of the message.
COLLECTIVE_OPCODES = frozenset({
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter", "all-to-all",
    "ragged-all-to-all", "collective-permute", "collective-permute-start", "collective-broadcast",
})  # fmt: skip
GATHERS = frozenset({"all-gather", "all-gather-start"})
# HloInstructionProto's fields naming a collective's groups, as XLA's releases wrote them: replica_groups, then
# collective_device_list (explicit groups or an iota list), then a mesh and the axes the groups span
REPLICA_GROUPS, DEVICE_LIST, MESH_AXES = 49, 87, 93
T = TypeVar("T")


class XlaOp(NamedTuple):
    """One op of an XLA program: what it computes and moves, its operands' shapes for people, whether it is fp32
    matrix maths at default precision (which the backend may run on tensor cores in TF32), and its part in an
    attention the program writes out (:func:`attention_roles`), if any."""

    work: Work
    shapes: str
    fast_fp32: bool
    attention: tuple[int, str] | None = None  # (which of its computation's attentions, its role in it)


class _Shape(NamedTuple):
    element: int
    dims: tuple[int, ...]
    parts: tuple[_Shape, ...]  # a tuple's elements

    @property
    def bytes(self) -> float:
        if self.parts:
            return sum(part.bytes for part in self.parts)
        return math.prod(self.dims) * ELEMENT_TYPES.get(self.element, ("", 0))[1]


class _Instruction(NamedTuple):
    name: str
    opcode: str
    shape: _Shape
    operands: tuple[int, ...]
    called: tuple[int, ...]
    fields: ProtoFields  # all of them, for the few ops whose attributes are read


class Message(NamedTuple):
    """What one of an XLA program's collectives moves, as nccl-tests size a call: an all-reduce's buffer, an
    all-gather's whole output (each rank's piece times the ranks), a reduce-scatter's whole input, an all-to-all's or a
    permute's buffer; and the ranks of its group. NaN where the HLO does not say."""

    nbytes: float
    ranks: float


@dataclass
class Programs:
    """The HLO programs a capture holds, by id and name: what each of their ops computes and moves, and what each of
    their collectives moves, each program decoded when one of its ops is first asked for (a capture holds many a
    window never runs)."""

    protos: dict[int, bytes] = field(default_factory=dict)
    by_name: dict[str, list[int]] = field(default_factory=dict)  # a name's programs (one jax.jit, several shapes)
    _decoded: dict[tuple[Callable[[bytes], dict[str, Any]], int], dict[str, Any]] = field(default_factory=dict)

    def op(self, module: str, op: str, program: int | None) -> XlaOp | None:
        """What op ``op`` of program ``module`` computes: of the program with id ``program`` where the kernel names
        it, else of the one program of that name holding such an op (None where several do, unless they agree)."""
        return self._find(self.ops, module, op, program)

    def message(self, module: str, op: str, program: int | None) -> Message | None:
        """What collective ``op`` of program ``module`` moves, found as :meth:`op` finds an op."""
        return self._find(self.messages, module, op, program)

    def ambiguous(self, module: str, op: str, table: Callable[[int], dict[str, Any]] | None = None) -> bool:
        """Whether programs of one name hold different ops of the name ``op`` (in ``table``: :meth:`ops` unless
        said): a kernel naming no program id (as a JSON export's do) is then none of them for certain."""
        return len(set(self._candidates(table or self.ops, module, op))) > 1

    def _find(self, table: Callable[[int], dict[str, T]], module: str, op: str, program: int | None) -> T | None:
        if program is not None and program in self.protos:
            return table(program).get(op)
        found = set(self._candidates(table, module, op))
        return found.pop() if len(found) == 1 else None

    def _candidates(self, table: Callable[[int], dict[str, T]], module: str, op: str) -> list[T]:
        return [found for p in self.by_name.get(module, []) if (found := table(p).get(op)) is not None]

    def ops(self, program: int) -> dict[str, XlaOp]:
        """The ops of program ``program``, by name; none where its HLO does not decode."""
        return self._decode(program_ops, program)

    def messages(self, program: int) -> dict[str, Message]:
        """The collectives of program ``program``, by name; none where its HLO does not decode."""
        return self._decode(program_messages, program)

    def _decode(self, decode: Callable[[bytes], dict[str, T]], program: int) -> dict[str, T]:
        if (decode, program) not in self._decoded:
            try:
                self._decoded[decode, program] = decode(self.protos[program])
            except (MalformedProtobuf, ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError,
                    RecursionError):  # fmt: skip
                self._decoded[decode, program] = {}
        return self._decoded[decode, program]

    def add(self, name: str, proto: bytes) -> None:
        """Add the program ``name`` (``MODULE(ID)``) whose ``HloProto`` is ``proto``; passed over where the name is
        not a program's."""
        if (match := PROGRAM_NAME.match(name)) is not None:
            program = int(match.group(2))
            self.protos[program] = proto
            self.by_name.setdefault(match.group(1), []).append(program)

    def __bool__(self) -> bool:
        return bool(self.protos)


def programs(protos: Iterable[tuple[str, bytes]]) -> Programs:
    """The programs of ``(MODULE(ID), HloProto bytes)`` pairs."""
    found = Programs()
    for name, proto in protos:
        found.add(name, proto)
    return found


def programs_space(source: str, metadata: dict[str, Any]) -> str | None:
    """The XSpace holding the programs of the capture whose trace is ``source`` (with top-level ``metadata``): the
    file itself, the XSpace beside a jax.profiler JSON export, or the one an annotated trace names; None where there
    is none."""
    space = source if source.lower().endswith(XSPACE_SUFFIX) else xspace_beside(source)
    if space is None and isinstance(named := metadata.get(PROGRAMS_FROM), str):
        space = named
    return str(Path(space).resolve()) if space is not None and names_file(space) else None


def capture_programs(source: str, metadata: dict[str, Any]) -> Programs:
    """The programs of the capture whose trace is ``source`` (with top-level ``metadata``): those its XSpace holds
    (:func:`programs_space`) and XProf's ``*.hlo_proto.pb`` files beside it; none where there are none."""
    protos: list[tuple[str, bytes]] = []
    if space := programs_space(source, metadata):
        try:
            protos.extend(hlo_protos(space))
        except TraceError:  # an XSpace that does not read: its programs are not known
            pass
    for file in sorted(Path(source).parent.glob("*" + HLO_FILE_SUFFIX)):
        try:
            protos.append((file.name[: -len(HLO_FILE_SUFFIX)], file.read_bytes()))
        except OSError:
            continue
    return programs(protos)


def trace_programs(trace: Trace) -> Programs:
    """The programs of ``trace``'s capture (:func:`capture_programs`), found once per trace."""
    return trace.derive("hlo.programs", lambda: capture_programs(trace.source, trace.metadata))


class XlaArgs(msgspec.Struct):
    """What an XLA kernel's args say of the op it runs (as the exporter writes them, text; ids as numbers too)."""

    module: str = msgspec.field(name="hlo_module", default="")
    op: str = msgspec.field(name="hlo_op", default="")
    program: str | int = msgspec.field(name=PROGRAM_ID, default="")
    path: str = msgspec.field(name="name", default="")  # the op's path in the framework (jit(f)/dot_general)
    correlation: str | int = msgspec.field(name="correlation_id", default="")  # its launch's: links it to the XSpace


_DECODE_XLA = msgspec.json.Decoder(XlaArgs)


def xla_args(kept: bytes) -> XlaArgs:
    """A kernel's :class:`XlaArgs` from its kept args (none where they are not an XLA kernel's)."""
    try:
        return _DECODE_XLA.decode(kept)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return XlaArgs()


def named_program(args: XlaArgs) -> int | None:
    """The id of the program a kernel's args name (an XSpace's kernels name it; a JSON export's do not)."""
    return int(args.program) if str(args.program).isdigit() else None


def launched_program(trace: Trace, args: XlaArgs, row: int) -> int | None:
    """The id of the program kernel ``row`` (with ``args``) ran, by its launch in the XSpace of ``trace`` (a JSON
    export, or a trace annotated from one): by its device's process and its correlation id; None where that XSpace
    does not say or there is none."""
    pid = trace.tracks[trace.track[row]].pid
    return _programs_beside(trace).get((pid, str(args.correlation))) if isinstance(pid, int) else None


def _programs_beside(trace: Trace) -> dict[tuple[int, str], int]:
    """The program ids of the device ops of the XSpace of ``trace``, read once; none where there is none."""
    space = programs_space(trace.source, trace.metadata)
    return trace.derive("hlo.device_programs", lambda: device_programs(space) if space else {})


def collective_messages(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``rows`` (an XLA trace's collectives: a GPU's kernels, each naming the op of its program it runs in
    its args; a TPU's ops, each named by its op): what it moves and the ranks of its group, by its program's HLO
    (:func:`program_messages`); NaN where the capture holds no HLO for it. Collectives of one op of one program are
    looked up once; each of a JSON export (which names no program id) whose op programs of one name hold
    differently, by its launch in the XSpace beside it."""
    nbytes, ranks = np.full(rows.size, math.nan), np.full(rows.size, math.nan)
    if trace.dialect != "xla" or rows.size == 0 or not (programs := trace_programs(trace)):
        return nbytes, ranks
    looked_up: dict[tuple[str, str, str], tuple[bool, Message | None]] = {}  # by launch?, else what it moves
    for i in np.flatnonzero(trace.args_ref[rows] >= 0).tolist():
        row = int(rows[i])
        args = xla_args(trace.kept_args[trace.args_ref[row]])
        op = args.op or trace.names[trace.name[row]]  # a TPU's op is named by itself
        key = (args.module, op, str(args.program))
        if key not in looked_up:
            program = named_program(args)
            by_launch = program is None and programs.ambiguous(args.module, op, programs.messages)
            looked_up[key] = (by_launch, None if by_launch else programs.message(args.module, op, program))
        by_launch, moved = looked_up[key]
        if by_launch:
            moved = programs.message(args.module, op, launched_program(trace, args, row))
        if moved is not None:
            nbytes[i], ranks[i] = moved
    return nbytes, ranks


def program_ops(proto: bytes) -> dict[str, XlaOp]:
    """Each op of the program (``HloProto``) that runs as a kernel, by name: what it computes and moves."""
    computations, fused = _computations(proto)
    for instructions in computations.values():
        for instruction in instructions:
            fused.update(instruction.called if instruction.opcode == "fusion" else ())
    found: dict[str, XlaOp] = {}
    for number, instructions in computations.items():
        if number in fused:
            continue
        by_id = {int_field(i.fields, 35): i for i in instructions}
        ops: dict[str, XlaOp] = {}
        for instruction in instructions:
            operands = [by_id[i].shape for i in instruction.operands if i in by_id]
            work = _work(proto, instruction, operands, computations)
            if work is not None:
                ops[instruction.name] = XlaOp(
                    work, _shape_text(operands), _fast_fp32(proto, instruction, computations, work)
                )
        for name, role in attention_roles(instructions, ops, computations).items():
            ops[name] = ops[name]._replace(attention=role)
        found.update(ops)
    return found


def program_messages(proto: bytes) -> dict[str, Message]:
    """Each collective of the program (``HloProto``), by name: what it moves (:class:`Message`). An ``async-start``
    that runs a collective's computation (XLA's asynchronous reduce-scatter and all-to-all) moves what that collective
    moves."""
    computations, _ = _computations(proto)
    found: dict[str, Message] = {}
    runs: dict[int, Message] = {}  # a computation's collective, by the computation's id
    for number, instructions in computations.items():
        by_id = {int_field(i.fields, 35): i for i in instructions}
        for instruction in instructions:
            if instruction.opcode in COLLECTIVE_OPCODES:
                operands = [by_id[i].shape for i in instruction.operands if i in by_id]
                found[instruction.name] = runs[number] = _message(proto, instruction, operands)
    for instructions in computations.values():
        for instruction in instructions:
            ran = [runs[called] for called in instruction.called if called in runs]
            if instruction.opcode == "async-start" and ran:
                found[instruction.name] = ran[0]
    return found


def _computations(proto: bytes) -> tuple[dict[int, list[_Instruction]], set[int]]:
    """The program's computations (``HloProto.hlo_module``), their instructions by the computation's id, and the ids
    of those that are fusions'."""
    top = message(proto, 0, len(proto))
    if 1 not in top:
        raise ValueError("no hlo_module")
    module = message(proto, *top[1][-1])
    computations: dict[int, list[_Instruction]] = {}
    fusions: set[int] = set()
    for at in module.get(3, []):
        fields = message(proto, *at)
        computations[int_field(fields, 5)] = [_instruction(proto, message(proto, *i)) for i in fields.get(2, [])]
        if int_field(fields, 7):
            fusions.add(int_field(fields, 5))
    return computations, fusions


def _message(proto: bytes, op: _Instruction, operands: list[_Shape]) -> Message:
    """What collective ``op`` (its operands' shapes ``operands``) moves, and the ranks of its group."""
    ranks = _group_ranks(proto, op.fields)
    given = sum(_known_bytes(shape) for shape in operands) if operands else math.nan
    return Message(float(given * ranks if op.opcode in GATHERS else given), ranks)


def _known_bytes(shape: _Shape) -> float:
    """A shape's bytes; NaN where an element type is not one :data:`ELEMENT_TYPES` knows."""
    if shape.parts:
        return sum(_known_bytes(part) for part in shape.parts)
    return math.prod(shape.dims) * ELEMENT_TYPES[shape.element][1] if shape.element in ELEMENT_TYPES else math.nan


def _group_ranks(proto: bytes, fields: ProtoFields) -> float:
    """The ranks in each group of a collective, as its HLO gives its groups: ``replica_groups`` (each group's ids),
    or the ``collective_device_list`` that took its place (the groups, or an iota list: so many groups of so many
    devices), or a mesh and the axes of it the groups span (their sizes' product); NaN where the groups differ in size,
    a group spans every device (an empty list, whose count the instruction does not give) or a part of an axis."""
    groups = fields.get(REPLICA_GROUPS, [])
    if DEVICE_LIST in fields:
        devices = message(proto, *fields[DEVICE_LIST][-1])
        if 2 in devices:  # IotaReplicaGroupListProto: num_replica_groups, num_devices_per_group, …
            return _ranks(int_field(message(proto, *devices[2][-1]), 2))
        groups = devices.get(1, [])
    if groups:
        in_group = {len(packed_ints(proto, message(proto, *group).get(1, []))) for group in groups}
        return _ranks(in_group.pop()) if len(in_group) == 1 else math.nan
    return _mesh_ranks(proto, message(proto, *fields[MESH_AXES][-1])) if MESH_AXES in fields else math.nan


def _mesh_ranks(proto: bytes, mesh_axes: ProtoFields) -> float:
    """The ranks in a group that spans the given axes of a mesh (its axes' names and sizes, then the axes spanned,
    each by its index): their sizes' product; NaN where an axis is out of range or only a part of one is spanned."""
    mesh = message(proto, *mesh_axes[1][-1]) if 1 in mesh_axes else {}
    sizes = [int_field(message(proto, *axis), 2) for axis in mesh.get(1, [])]
    spans = [message(proto, *ref) for ref in mesh_axes.get(2, [])]
    if not spans or any(set(ref) - {1} or not 0 <= int_field(ref, 1) < len(sizes) for ref in spans):
        return math.nan
    return _ranks(math.prod(sizes[int_field(ref, 1)] for ref in spans))


def _ranks(count: int) -> float:
    """A group's count of ranks as a figure: NaN for none (a field left empty)."""
    return float(count) if count >= 1 else math.nan


SOFTMAX_STEPS = 12  # ops between an attention's two GEMMs at most (scale, mask, max, exp, sum, divide, casts)


def attention_roles(instructions: list[_Instruction], ops: dict[str, XlaOp],
                    computations: dict[int, list[_Instruction]]) -> dict[str, tuple[int, str]]:  # fmt: skip
    """Each attention a computation writes out, by its dataflow: a GEMM writing scores [..., queries, keys], ops of
    that size (or reduced over the keys) after it, among them an ``exponential`` over the scores and a reduction over
    the keys (a softmax's max or sum: a pointwise exponential alone, softplus's, is no softmax), and a GEMM reading the
    scores so normalised. Its ops by name, each with the attention's number and its role: ``first``, ``softmax``
    (the exponential's op), ``second`` or ``step``."""
    ident = {i.name: int_field(i.fields, 35) for i in instructions}
    users: dict[int, list[_Instruction]] = {}
    for instruction in instructions:
        for operand in instruction.operands:
            users.setdefault(operand, []).append(instruction)

    def gemm(op: _Instruction) -> bool:
        return op.name in ops and ops[op.name].work.family == "gemm"

    roles: dict[str, tuple[int, str]] = {}
    number = 0  # the attentions found so far
    for first in (op for op in instructions if gemm(op) and len(ops[op.name].work.out_shape) >= 2):
        scores = math.prod(ops[first.name].work.out_shape)
        sizes = (scores, scores // max(ops[first.name].work.out_shape[-1], 1))  # the scores, and reduced over keys
        steps: dict[str, _Instruction] = {}
        frontier, second = [first], None
        while frontier and second is None and len(steps) < SOFTMAX_STEPS:
            reached = []
            for op in frontier:
                for user in users.get(ident[op.name], []):
                    if gemm(user):
                        if op is not first and math.prod(_array(op.shape).dims) == scores:
                            second = second or user
                    elif user.name not in steps and math.prod(_array(user.shape).dims) in sizes:
                        steps[user.name] = user
                        reached.append(user)
            frontier = reached
        softmax = [op for op in steps.values() if math.prod(_array(op.shape).dims) == scores
                   and _computes(op, "exponential", computations)]  # fmt: skip
        reduced = any(math.prod(_array(op.shape).dims) == sizes[1] < scores for op in steps.values())  # max, sum
        if second is None or not softmax or not reduced or any(name in roles for name in (first.name, second.name)):
            continue
        roles.update({name: (number, "step") for name in steps if name in ops})
        roles.update({first.name: (number, "first"), softmax[-1].name: (number, "softmax"),
                      second.name: (number, "second")})  # fmt: skip
        number += 1
    return roles


def _computes(op: _Instruction, opcode: str, computations: dict[int, list[_Instruction]]) -> bool:
    """Whether ``op`` is an ``opcode``, or a fusion computing one."""
    return op.opcode == opcode or any(
        fused.instruction.opcode == opcode for called in op.called for fused in _fused(called, computations)
    )


def _shape_text(operands: list[_Shape]) -> str:
    """Operands' shapes as the op table shows them: ``8192x1024, 1024x1024``."""
    return ", ".join("x".join(map(str, s.dims)) if s.dims else "·" for s in operands if not s.parts).rstrip(", ·")


def _fast_fp32(proto: bytes, op: _Instruction, computations: dict[int, list[_Instruction]], work: Work) -> bool:
    """Whether ``op`` is fp32 matrix maths whose dots all leave the precision to the backend (DEFAULT, no algorithm),
    which may then run them in TF32 (XLA does on NVIDIA's tensor cores): judged at the TF32 peak, never called fp32
    (``precision=HIGHEST`` asks for fp32)."""
    if work.family not in ("gemm", "conv") or work.dtype != "fp32":
        return False
    inner = [op, *(fused.instruction for c in op.called for fused in _fused(c, computations))]
    for instruction in inner:
        if instruction.opcode in ("dot", "convolution", "custom-call") and 51 in instruction.fields:
            config = message(proto, *instruction.fields[51][-1])
            if int_field(config, 2) or any(p != DEFAULT_PRECISION for p in packed_ints(proto, config.get(1, []))):
                return False
    return True


def _instruction(proto: bytes, fields: ProtoFields) -> _Instruction:
    return _Instruction(
        name=text_field(proto, fields, 1),
        opcode=text_field(proto, fields, 2),
        shape=_shape(proto, fields[3][-1]) if 3 in fields else _Shape(0, (), ()),
        operands=tuple(packed_ints(proto, fields.get(36, []))),
        called=tuple(packed_ints(proto, fields.get(38, []))),
        fields=fields,
    )


def _shape(proto: bytes, at: tuple[int, int]) -> _Shape:
    """A ShapeProto: an array's element type and sizes (none of an unknown type where a size is negative, which no
    array has), or a tuple's parts."""
    fields = message(proto, *at)
    dims = tuple(packed_ints(proto, fields.get(3, [])))
    valid = all(size >= 0 for size in dims)
    return _Shape(
        int_field(fields, 2) if valid else 0,
        dims if valid else (),
        tuple(_shape(proto, part) for part in fields.get(4, [])),
    )


def _array(shape: _Shape) -> _Shape:
    """A result's array: a library call's first element (the rest is its workspace)."""
    return shape.parts[0] if shape.parts else shape


def _work(proto: bytes, op: _Instruction, operands: list[_Shape],
          computations: dict[int, list[_Instruction]]) -> Work | None:  # fmt: skip
    """What ``op`` (of a computation that is not a fusion's; ``operands``: its operands' shapes) computes and moves;
    None for an op that runs no kernel of its own or whose maths is not modelled."""
    moved = sum(s.bytes for s in operands) + op.shape.bytes
    if op.opcode == "fusion":
        inner = [fused for c in op.called for fused in _fused(c, computations)]
        for maths, opcodes in ((_gemm, ("dot",)), (_convolution, ("convolution", "custom-call"))):
            products = [w for i, shapes in inner if i.opcode in opcodes and (w := maths(proto, i, shapes)) is not None]
            if products:
                main = max(products, key=lambda w: w.flops)
                return Work(main.family, sum(w.flops for w in products), moved, main.dtype, mnk=main.mnk,
                            out_shape=_array(op.shape).dims, item_bytes=main.item_bytes)  # fmt: skip
        return _pointwise(op, [fused.instruction for fused in inner], operands, moved)
    if op.opcode == "custom-call":
        target = text_field(proto, op.fields, 28)
        if LIBRARY_GEMM.search(target):
            return _library_gemm(proto, op, operands, moved)
        if LIBRARY_CONV.search(target) and len(operands) >= 2:
            return _convolution(proto, op, operands, out=_array(op.shape), moved=moved)
        if LIBRARY_ATTENTION.search(target):
            return _fused_attention(proto, op, operands, moved, backward="backward" in target.lower())
        return None
    if op.opcode in ("dot", "convolution"):
        maths = _gemm if op.opcode == "dot" else _convolution
        return maths(proto, op, operands, moved=moved)
    return None


class _Fused(NamedTuple):
    instruction: _Instruction
    operands: list[_Shape]  # its operands' shapes, found in its own computation


def _fused(computation: int, computations: dict[int, list[_Instruction]]) -> list[_Fused]:
    """A fused computation's instructions with their operands' shapes, those of fusions nested in it too."""
    instructions = computations.get(computation, [])
    shapes = {int_field(i.fields, 35): i.shape for i in instructions}
    found = []
    for instruction in instructions:
        found.append(_Fused(instruction, [shapes[o] for o in instruction.operands if o in shapes]))
        for called in instruction.called if instruction.opcode == "fusion" else ():
            found.extend(_fused(called, computations))
    return found


def _whole_bytes(item: float) -> int:
    """Bytes per element as :class:`Work` keeps them: a 4-bit type's as one, an unknown type's as fp32's."""
    return max(1, math.ceil(item)) if item else 4


def _dtype(shape: _Shape) -> tuple[str, float]:
    return ELEMENT_TYPES.get(_array(shape).element, ("", 0))


def _gemm(proto: bytes, op: _Instruction, operands: list[_Shape], moved: float | None = None,
          dims: dict[str, list[int]] | None = None) -> Work | None:  # fmt: skip
    """A dot's work: 2 FLOPs per output element per contracted element (``dims``: its dimension numbers, read from
    the op where not given)."""
    if (op.opcode != "dot" and dims is None) or len(operands) < 2:
        return None
    if dims is None:
        numbers = message(proto, *op.fields[30][-1]) if 30 in op.fields else {}
        dims = {key: packed_ints(proto, numbers.get(number, [])) for number, key in enumerate(
            ("lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions",
             "rhs_batch_dimensions"), start=1)}  # fmt: skip
    lhs, rhs = operands[0].dims, operands[1].dims
    contracting, batch = dims["lhs_contracting_dimensions"], dims["lhs_batch_dimensions"]
    if any(d >= len(lhs) for d in (*contracting, *batch)) or any(
        d >= len(rhs) for d in (*dims["rhs_contracting_dimensions"], *dims["rhs_batch_dimensions"])
    ):
        return None
    k = math.prod(lhs[d] for d in contracting)
    products = math.prod(lhs[d] for d in batch)
    m = math.prod(lhs) // max(k * products, 1)
    n = math.prod(rhs) // max(k * products, 1)
    dtype, item = _dtype(operands[0])
    return Work("gemm", 2.0 * products * m * n * k, moved if moved is not None else 0.0, dtype or "fp32",
                dtype_recorded=bool(dtype), mnk=(m, n, k), out_shape=_array(op.shape).dims,
                item_bytes=_whole_bytes(item))  # fmt: skip


def _backend_config(proto: bytes, op: _Instruction) -> Any:
    """A library call's backend config, the JSON XLA's GPU backends write (None where it has none that decodes)."""
    if 43 not in op.fields:
        return None
    begin, end = op.fields[43][-1]
    try:
        return json.loads(proto[begin:end])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _library_gemm(proto: bytes, op: _Instruction, operands: list[_Shape], moved: float) -> Work | None:
    """A GEMM library call's work, by the dimension numbers its backend config gives."""
    try:
        numbers = _backend_config(proto, op)["gemm_backend_config"]["dot_dimension_numbers"]
        dims = {key: [int(d) for d in numbers.get(key, [])] for key in (
            "lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions",
            "rhs_batch_dimensions")}  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return _gemm(proto, op, operands, moved, dims)


def _fused_attention(proto: bytes, op: _Instruction, operands: list[_Shape], moved: float,
                     backward: bool) -> Work | None:  # fmt: skip
    """cuDNN's fused attention as XLA calls it: Q·Kᵀ and the scores times V over the score matrix its backend config
    names ([batch, heads, queries, keys]), 2·B·N·T·S·(E + Ev) FLOPs with E and Ev the head sizes of Q and V (its first
    and third operands, forward or backward, in either layout); half where the mask is causal, each query's keys at most
    its sliding window's; a backward twice its forward, as the Kineto side counts attention."""
    try:
        config = _backend_config(proto, op)["cudnn_fmha_backend_config"]
        batch, heads, queries, keys = (int(d) for d in config["intermediate_tensor_shape"]["dimensions"])
        window = int(config.get("sliding_window_length") or 0)
        causal = config.get("mask_type") in CAUSAL_MASKS
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if len(operands) < 3 or not operands[0].dims or not operands[2].dims or min(batch, heads, queries, keys) < 0:
        return None
    pairs = queries * (min(keys, window) if window > 0 else keys / (2 if causal else 1))  # of a query and a key
    flops = 2.0 * batch * heads * pairs * (operands[0].dims[-1] + operands[2].dims[-1]) * (2 if backward else 1)
    dtype, item = _dtype(operands[0])
    return Work("attention", flops, moved, dtype or "fp32", dtype_recorded=bool(dtype), out_shape=_array(op.shape).dims,
                item_bytes=_whole_bytes(item))  # fmt: skip


def _convolution(proto: bytes, op: _Instruction, operands: list[_Shape], moved: float | None = None,
                 out: _Shape | None = None) -> Work | None:  # fmt: skip
    """A convolution's work as XLA's cost analysis counts it: 2 FLOPs per (output element, input feature of its group,
    kernel tap) where the tap falls on the input, not on its padding (by the op's window); every tap where the op has
    no window."""
    if (op.opcode not in ("convolution", "custom-call")) or len(operands) < 2 or 16 not in op.fields:
        return None
    numbers = message(proto, *op.fields[16][-1])
    source, kernel, result = operands[0].dims, operands[1].dims, (out if out is not None else _array(op.shape)).dims
    # ConvolutionDimensionNumbers: input batch 7, its spatial 11; kernel input and output features 3, 4, spatial 6;
    # output spatial 12
    input_spatial, kernel_spatial, output_spatial = (packed_ints(proto, numbers.get(f, [])) for f in (11, 6, 12))
    input_batch, input_feature, output_feature = (int_field(numbers, f) for f in (7, 3, 4))
    if (max((input_batch, *input_spatial), default=0) >= len(source)
            or max((input_feature, output_feature, *kernel_spatial), default=0) >= len(kernel)
            or max(output_spatial, default=0) >= len(result)
            or not len(input_spatial) == len(kernel_spatial) == len(output_spatial)):  # fmt: skip
        return None
    window = [message(proto, *d) for d in message(proto, *op.fields[15][-1]).get(1, [])] if 15 in op.fields else []
    positions = 1
    for i, (inside, size, outside) in enumerate(zip(input_spatial, kernel_spatial, output_spatial)):
        span = window[i] if i < len(window) else {}
        positions *= _valid_taps(source[inside], kernel[size], result[outside], span)
    groups = max(int_field(op.fields, 58), 1)  # batch_group_count: a filter gradient's batch split into groups
    batch = source[input_batch] // groups
    dtype, item = _dtype(operands[0])
    flops = 2.0 * batch * kernel[input_feature] * kernel[output_feature] * positions
    return Work("conv", flops, moved if moved is not None else 0.0, dtype or "fp32", dtype_recorded=bool(dtype),
                out_shape=result, item_bytes=_whole_bytes(item))  # fmt: skip


def _valid_taps(size: int, taps: int, out: int, window: ProtoFields) -> int:
    """Of one spatial dimension's (output position, kernel tap) pairs, those that fall on the input rather than its
    padding or the holes of its dilation (WindowDimension: stride 2, padding_low 3, window_dilation 5,
    base_dilation 6)."""
    if not window:
        return out * taps
    stride, low, dilation, base = (int_field(window, f) for f in (2, 3, 5, 6))
    position = np.arange(out)[:, None] * max(stride, 1) - low + np.arange(taps)[None, :] * max(dilation, 1)
    base = max(base, 1)
    return int(np.count_nonzero((position >= 0) & (position % base == 0) & (position // base < size)))


def _pointwise(op: _Instruction, inner: list[_Instruction], operands: list[_Shape], moved: float) -> Work:
    """A fusion without matrix maths: a reduction where it reduces, else pointwise (no FLOPs where it only moves
    data)."""
    out = _array(op.shape)
    dtype, item = _dtype(operands[0] if operands else op.shape)
    read = sum(math.prod(s.dims) for s in operands if not s.parts)
    if any(i.opcode in ("reduce", "reduce-window") for i in inner):
        return Work("reduction", float(read), moved, dtype or "fp32", dtype_recorded=bool(dtype),
                    out_shape=out.dims, item_bytes=_whole_bytes(item))  # fmt: skip
    arithmetic = any(i.opcode not in NO_ARITHMETIC for i in inner)
    flops = float(math.prod(out.dims)) if arithmetic else 0.0
    return Work("elementwise", flops, moved, dtype or "fp32", dtype_recorded=bool(dtype), out_shape=out.dims,
                item_bytes=_whole_bytes(item))  # fmt: skip
