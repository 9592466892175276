"""XSpace protobufs (``*.xplane.pb``) encoded field by field, as ``xplane.proto`` lays them out, and the HLO programs
their metadata plane holds (``hlo.proto``): the pieces the XSpace reader's and the HLO model's tests build their cases
from, and a JAX-on-GPU capture of any size for bench/bench_xspace.py.

    python bench/xspace_synth.py --mb 50 --out bench/out/xspace_50mb.xplane.pb
"""

from __future__ import annotations

import argparse
import json
import struct


def varint(value: int) -> bytes:
    """A varint; an int64 below zero as ten bytes of two's complement, as protobuf writes it."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def number(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def message(field: int, body: bytes | str) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return varint(field << 3 | 2) + varint(len(data)) + data


def stat(metadata_id: int, value: object, ref: bool = False) -> bytes:
    """An XStat: a double, an int64, a string, bytes, or (``ref``) a reference to a stat metadata's name."""
    if ref:
        return number(1, metadata_id) + number(7, int(value))  # type: ignore[call-overload]
    if isinstance(value, float):
        return number(1, metadata_id) + varint(2 << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, int):
        return number(1, metadata_id) + number(4, value)
    if isinstance(value, bytes):
        return number(1, metadata_id) + message(6, value)
    return number(1, metadata_id) + message(5, str(value))


def event(metadata_id: int, offset_ps: int, duration_ps: int, *stats: bytes) -> bytes:
    fields = number(1, metadata_id) + number(2, offset_ps) + number(3, duration_ps)
    return fields + b"".join(message(4, s) for s in stats)


def line(line_id: int, name: str, start_ns: int, *events: bytes, display_id: int = 0, display: str = "") -> bytes:
    header = number(1, line_id) + message(2, name) + number(3, start_ns)
    tail = (number(10, display_id) if display_id else b"") + (message(11, display) if display else b"")
    return header + b"".join(message(4, e) for e in events) + tail


def plane(plane_id: int, name: str, lines=(), event_names=None, stat_names=None, stats=()) -> bytes:
    """An XPlane: ``event_names`` maps an id to a name, or to (name, display name, [stats]); ``stat_names`` an id to a
    stat's name."""
    body = number(1, plane_id) + message(2, name) + b"".join(message(3, x) for x in lines)
    for key, value in (event_names or {}).items():
        name_of, display, kind_stats = (value, "", []) if isinstance(value, str) else value
        entry = number(1, key) + message(2, name_of) + (message(4, display) if display else b"")
        entry += b"".join(message(5, s) for s in kind_stats)
        body += message(4, number(1, key) + message(2, entry))
    for key, value in (stat_names or {}).items():
        body += message(5, number(1, key) + message(2, number(1, key) + message(2, value)))
    return body + b"".join(message(6, s) for s in stats)


def space(*planes: bytes) -> bytes:
    return b"".join(message(1, p) for p in planes) + message(4, "host-1")


# HLO (xla's hlo.proto and xla_data.proto), for the programs an XSpace's metadata plane holds
BF16, F32 = 16, 11  # PrimitiveType


def packed(field: int, values: list[int]) -> bytes:
    return message(field, b"".join(varint(v) for v in values)) if values else b""


def shape(element: int, *dims: int, parts: tuple[bytes, ...] = ()) -> bytes:
    """A ShapeProto: an array of ``element`` (a PrimitiveType), or a tuple of ``parts``."""
    return number(2, element if not parts else 13) + packed(3, list(dims)) + b"".join(message(4, p) for p in parts)


def instruction(name: str, opcode: str, result: bytes, ident: int, operands=(), called=(), extra=b"") -> bytes:
    return (message(1, name) + message(2, opcode) + message(3, result) + number(35, ident)
            + packed(36, list(operands)) + packed(38, list(called)) + extra)  # fmt: skip


def computation(name: str, ident: int, *instructions: bytes, fused: bool = False) -> bytes:
    return message(1, name) + b"".join(message(2, i) for i in instructions) + number(5, ident) + number(7, int(fused))


def hlo(*computations: bytes, module: str = "jit_step") -> bytes:
    """An HloProto of a module holding ``computations``."""
    return message(1, message(1, module) + b"".join(message(3, c) for c in computations))


def gemm_config(lhs_contracting: int, rhs_contracting: int) -> bytes:
    """A library GEMM's backend config (JSON), its dimension numbers."""
    numbers = {"lhs_contracting_dimensions": [str(lhs_contracting)],
               "rhs_contracting_dimensions": [str(rhs_contracting)],
               "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}  # fmt: skip
    return message(43, json.dumps({"gemm_backend_config": {"dot_dimension_numbers": numbers}}))


def fusions(*inner: tuple[str, str], names=("the_fusion",), element: int = BF16, rows: int = 1024, cols: int = 512,
            out: tuple[int, ...] | None = None, body: int = 2, first: int = 2) -> list[bytes]:  # fmt: skip
    """A fused computation (id ``body``) of ``inner`` (name, opcode) ops in a row over one [rows, cols] input, and one
    fusion calling it per name (ids from ``first``), as an entry computation holds them after its parameter (id 1)."""
    result = shape(element, *(out or (rows, cols)))
    ops = [instruction("p0", "parameter", shape(element, rows, cols), 1)]
    ops += [instruction(name, opcode, result, i + 2, (i + 1,)) for i, (name, opcode) in enumerate(inner)]
    calls = [instruction(name, "fusion", result, first + i, (1,), (body,)) for i, name in enumerate(names)]
    return [computation(f"fused.{body}", body, *ops, fused=True), *calls]


def fusion_program(*inner: tuple[str, str], **kwargs) -> bytes:
    """A program of fusions (:func:`fusions`) over its one parameter."""
    fused, *calls = fusions(*inner, **kwargs)
    dims = kwargs.get("rows", 1024), kwargs.get("cols", 512)
    parameter = instruction("x", "parameter", shape(kwargs.get("element", BF16), *dims), 1)
    return hlo(fused, computation("main", 1, parameter, *calls))


def step_program() -> bytes:
    """The HLO of :func:`gpu_capture`'s jitted step: pointwise fusions, a reduction and a 2048³ bf16 library GEMM."""
    size = {"rows": 2048, "cols": 2048}
    fused, add, multiply = fusions(("add.1", "add"), names=("loop_add_fusion", "loop_multiply_fusion"), **size)
    reduced, reduce_call = fusions(("reduce.1", "reduce"), names=("input_reduce_fusion",), out=(2048,), body=3,
                                   first=5, **size)  # fmt: skip
    square = shape(BF16, 2048, 2048)
    gemm = instruction("custom-call.1", "custom-call", shape(0, parts=(square, shape(6, 4096))), 6, (1, 1),
                       extra=message(28, "__cublas$lt$matmul") + gemm_config(1, 0))  # fmt: skip
    entry = computation("main", 1, instruction("x", "parameter", square, 1), add, multiply, reduce_call, gemm)
    return hlo(fused, reduced, entry)


_KERNELS = ("loop_add_fusion", "input_reduce_fusion", "custom-call.1", "loop_multiply_fusion")
_STATS = {1: "correlation_id", 2: "hlo_op", 3: "hlo_module", 4: "kernel_details", 5: "device_id", 6: "program_id"}
PROGRAM = 1  # the step's program id


def gpu_capture(steps: int, kernels_per_step: int = 40) -> bytes:
    """A jitted step on one GPU: per step a ``PjitFunction(step)`` call on the host's Python thread, a launch per
    kernel on a runtime thread, and the kernels on one stream, each launch and kernel sharing a correlation id."""
    step_ps, launch_ps, kernel_ps = 5_000_000_000, 8_000_000, 90_000_000
    host_python, host_launches, stream = [], [], []
    for step in range(steps):
        at = step * step_ps
        host_python.append(event(1, at, step_ps // 2))
        for k in range(kernels_per_step):
            correlation = step * kernels_per_step + k
            launched = at + 1_000_000 + k * (launch_ps + 2_000_000)
            host_launches.append(event(2, launched, launch_ps, stat(1, correlation), stat(5, 0)))
            stream.append(event(10 + k % len(_KERNELS), launched + 50_000_000 + k * kernel_ps, kernel_ps,
                                stat(1, correlation), stat(2, _KERNELS[k % len(_KERNELS)]), stat(3, "jit_step"),
                                stat(4, " grid:1024,1,1 block:256,1,1"), stat(6, PROGRAM)))  # fmt: skip
    host = plane(
        1,
        "/host:CPU",
        lines=[line(3213123867, "python", 0, *host_python), line(2356, "Host Threads/2356", 0, *host_launches)],
        event_names={1: "PjitFunction(step)", 2: "cuLaunchKernel"},
        stat_names=_STATS,
    )
    kernels = {10 + i: name for i, name in enumerate(_KERNELS)}
    device = plane(0, "/device:GPU:0", lines=[line(16, "Stream #16(Kernel)", 0, *stream)], event_names=kernels,
                   stat_names=_STATS)  # fmt: skip
    metadata = plane(2, "/host:metadata", event_names={1: (f"jit_step({PROGRAM})", "", [stat(1, step_program())])},
                     stat_names={1: "Hlo Proto"})  # fmt: skip
    return space(metadata, device, host)


def write_xspace(path: str, mb: float) -> None:
    """Write a :func:`gpu_capture` of about ``mb`` MB to ``path``."""
    per_step = len(gpu_capture(2)) / 2
    with open(path, "wb") as file:
        file.write(gpu_capture(max(1, int(mb * 1e6 / per_step))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    write_xspace(args.out, args.mb)


if __name__ == "__main__":
    main()
