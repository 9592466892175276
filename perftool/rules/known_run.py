"""What a trace records about how it was run, as detectors need it: the knobs, the job's size, a what-if.

Only emulator traces record their config; for other traces there is no ``KnownRun`` and detectors
give advice without "now N". Detectors ask this small interface, never the emulator's config type,
so they work the same on any trace; the engine builds it from the config an emulator trace carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perftool.emulator.config import EmulatorConfig
from perftool.emulator.plan import build_plan, io_tiles_needed
from perftool.rules import prediction
from perftool.rules.findings import Gain


@dataclass(frozen=True)
class KnownRun:
    """The knobs a trace was run with, the job's step count and optimizer state, and a what-if for fixes."""

    knobs: dict[str, Any]  # knob name -> value as run (loop_size, prefetch_depth, device_graphs, ...)
    steps: int  # full batches in the job (an epoch)
    padded_step: bool  # a short last batch padded to a full one adds a step of the full shape
    optimizer_state_bytes: float
    io_tiles_for_batch: int  # the fewest IO tiles that hold one micro-batch (0 without tiles)
    slow_ranks: tuple[dict[str, Any], ...]  # data-parallel ranks slower (or faster) than the rest, as configured
    what_if: Callable[[dict[str, Any]], Gain | None]  # the run again with these changes
    over_job: Callable[[dict[str, Any]], Gain | None]  # ... over its whole job, each one-time cost paid once
    describe: Callable[[dict[str, Any]], str]  # these changes in words ("loop size 64 → 50")
    ahead: Callable[[list[dict[str, Any]]], None]  # what-ifs of these changes simulated together now: each then free
    recorded: bool = True  # the trace records this config (else it is a fit to the trace, its job's length unknown)
    judges: frozenset[str] | None = None  # the settings whose changes a fit predicts (None: every one, as recorded)

    @classmethod
    def of(
        cls,
        config: EmulatorConfig,
        source: str = "emulator",
        recorded: bool = True,
        judges: frozenset[str] | None = None,
        interval: float | None = None,
    ) -> KnownRun:
        """How ``config`` runs; ``source`` names where the config came from in the gains it predicts. A config not
        ``recorded`` by the trace is a fit to a capture of part of a job: its gains are the steady state's, given
        with ``interval`` (relative), and only changes of the settings it ``judges`` (those read from the trace)
        are what-ifs on what it shows."""
        steps, last = config.epoch
        return cls(
            knobs=config.knobs.model_dump(),
            steps=steps,
            padded_step=config.knobs.last_batch == "pad" and last > 0,
            optimizer_state_bytes=float(config.workload.optimizer_state),
            io_tiles_for_batch=_io_tiles(config),
            slow_ranks=tuple(s.model_dump() for s in config.replicas.slow_ranks) if config.replicas else (),
            what_if=lambda changes: prediction.predicted(config, changes, source, recorded, interval),
            over_job=lambda changes: prediction.predicted(config, changes, source, interval=interval),
            describe=lambda changes: prediction.described(config, changes),
            ahead=lambda changes: prediction.ahead(config, changes),
            recorded=recorded,
            judges=judges,
        )


def _io_tiles(config: EmulatorConfig) -> int:
    """The fewest IO tiles that hold a micro-batch, ``N_IO ≈ 1.05 × bytes / 624 kB`` (0 on devices without tiles):
    every tile more is taken from compute, so a power of two above it only slows the step."""
    if not config.profile.tiles:
        return 0
    return max(int(io_tiles_needed(build_plan(config).input_bytes[0])), 1)
