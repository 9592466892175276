"""A kernel's launch configuration as Kineto records it (``grid``, ``block``, ``registers per thread``, ``shared
memory``) or XLA does (one ``kernel_details`` string), read from the args the loader keeps for long kernels, and what
it lets an SM hold at once (occupancy, by the CUDA occupancy calculator's rules and the trace's
``deviceProperties``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import msgspec

MAX_GRID_SIZE = 2**31 - 1  # CUDA's largest grid dimension: a larger one is no launch a device ran
REGISTER_UNIT = 256  # registers are allocated to a warp in units of this many
WARP_UNIT = 4  # ... and to an SM's warps in groups of this many warps
# the most thread blocks an SM holds at once, by compute capability (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"); any other holds 32
BLOCKS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}
RESERVED_SHARED_MEMORY = 1024  # bytes of shared memory the system takes per block from compute capability 8.0


class _Recorded(msgspec.Struct):
    grid: list[int] = []
    block: list[int] = []
    registers: float = msgspec.field(name="registers per thread", default=0)  # a float from some writers
    shared_memory: float = msgspec.field(name="shared memory", default=0)
    kernel_details: str = ""  # XLA's, in one string: "regs:32 static_shared:0 dynamic_shared:0 grid:4,1,1 block:..."


_DETAIL = re.compile(r"(\w+):([\d.,]+)")


_READ = msgspec.json.Decoder(_Recorded)


@dataclass(frozen=True)
class Launch:
    """A kernel's launch: thread blocks, threads per block, registers per thread and shared memory per block."""

    blocks: int
    threads: int  # 0 where the trace records no block
    registers: int
    shared_memory: int


def _size(dims: list[int]) -> int:
    """The product of 1 to 3 dimensions, each 1 to :data:`MAX_GRID_SIZE`; 0 where they are not that."""
    if not 1 <= len(dims) <= 3 or any(not 1 <= size <= MAX_GRID_SIZE for size in dims):
        return 0
    return math.prod(dims)


def launch_of(kept: bytes) -> Launch | None:
    """The launch a kernel's kept args record; None where they record no grid a device could run."""
    try:
        recorded = _READ.decode(kept)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    if not recorded.grid and recorded.kernel_details:
        recorded = _from_details(recorded.kernel_details)
    blocks = _size(recorded.grid)
    if not blocks:
        return None
    registers, shared_memory = (int(min(max(v, 0), 2**31)) for v in (recorded.registers, recorded.shared_memory))
    return Launch(blocks, _size(recorded.block), registers, shared_memory)


def _from_details(details: str) -> _Recorded:
    """The launch XLA's GPU tracers write as one string: CUPTI's ``regs:R static_shared:S dynamic_shared:D
    grid:X,Y,Z block:X,Y,Z occ_pct:P``, roctracer's ``grid:X,Y,Z block:X,Y,Z private_mem:P group_mem:G occ_pct:P``."""
    fields = dict(_DETAIL.findall(details))

    def dims(name: str) -> list[int]:
        parts = fields.get(name, "").split(",")
        return [int(p) for p in parts] if all(p.isdigit() for p in parts) else []

    def number(*names: str) -> float:
        return sum(float(fields[n]) for n in names if n in fields and fields[n].replace(".", "", 1).isdigit())

    return _Recorded(
        dims("grid"), dims("block"), number("regs"), number("static_shared", "dynamic_shared", "group_mem")
    )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class SmLimits:
    """What one SM holds at once, from the trace's ``deviceProperties``."""

    threads: int
    registers: int
    shared_memory: int
    warp: int
    blocks: int
    reserved_per_block: int

    @classmethod
    def of(cls, properties: dict[str, Any]) -> SmLimits | None:
        """The limits ``properties`` give; None where any is missing (an AMD device records no registers)."""
        names = ("maxThreadsPerMultiprocessor", "regsPerMultiprocessor", "sharedMemPerMultiprocessor", "warpSize")
        values = [properties.get(name, 0) for name in names]
        if not all(_positive_int(value) for value in values):
            return None
        major, minor = properties.get("computeMajor"), properties.get("computeMinor")
        version = (major, minor) if isinstance(major, int) and isinstance(minor, int) else (0, 0)
        threads, registers, shared_memory, warp = (int(value) for value in values)
        return cls(threads, registers, shared_memory, warp, BLOCKS_PER_SM.get(version, 32),
                   RESERVED_SHARED_MEMORY if version >= (8, 0) else 0)  # fmt: skip


@dataclass(frozen=True)
class Occupancy:
    """The warps an SM holds of a kernel as a share of the most it holds, what limits them, and the share the other
    limits would allow."""

    share: float
    limit: str  # "threads", "blocks", "registers" or "shared memory"
    without_limit: float


def occupancy(launch: Launch, sm: SmLimits) -> Occupancy | None:
    """The theoretical occupancy of ``launch`` on an SM with limits ``sm``; None where the launch records no block
    or could not run on it."""
    if not launch.threads or launch.threads > sm.threads:
        return None
    warps = -(-launch.threads // sm.warp)
    most_warps = sm.threads // sm.warp
    per_warp = -(-launch.registers * sm.warp // REGISTER_UNIT) * REGISTER_UNIT
    blocks = {
        "threads": most_warps // warps,
        "blocks": sm.blocks,
        "registers": sm.registers // per_warp // WARP_UNIT * WARP_UNIT // warps if per_warp else sm.blocks,
        "shared memory": sm.shared_memory // (launch.shared_memory + sm.reserved_per_block)
        if launch.shared_memory
        else sm.blocks,
    }
    # on a tie the threads' or the SM's block limit is named: registers alone do not limit what they tie with
    limit = min(blocks, key=lambda name: (blocks[name], name in ("registers", "shared memory")))
    if not blocks[limit]:
        return None
    others = min(count for name, count in blocks.items() if name != limit)
    return Occupancy(blocks[limit] * warps / most_warps, limit, others * warps / most_warps)
