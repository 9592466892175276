"""XSpace protobufs (``*.xplane.pb``) encoded field by field, as ``xplane.proto`` lays them out: the pieces the XSpace
reader's tests build their cases from, and a JAX-on-GPU capture of any size for bench/bench_xspace.py.

    python bench/xspace_synth.py --mb 50 --out bench/out/xspace_50mb.xplane.pb
"""

from __future__ import annotations

import argparse
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


_KERNELS = ("loop_add_fusion", "input_reduce_fusion", "custom-call.1", "loop_multiply_fusion")
_STATS = {1: "correlation_id", 2: "hlo_op", 3: "hlo_module", 4: "kernel_details", 5: "device_id"}


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
                                stat(4, " grid:1024,1,1 block:256,1,1")))  # fmt: skip
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
    return space(device, host)


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
