"""What every dialect shares: deciding event kinds with per-string tables, never per event."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from perftool.dialects import vocabulary
from perftool.trace.model import Kind, Role, Trace


class Dialect:
    """Maps one source's conventions onto track roles and event kinds.

    An event's kind is decided in three steps, each a table lookup indexed by numpy: its category
    (``category_kinds``), else the default for its track's role (``role_kinds``), and finally a
    name that means something on its own (``name_kind``, e.g. ``ProfilerStep#3`` or
    ``cudaStreamSynchronize``) overrides both. Names that only refine device work (a copy's
    direction, a collective) apply to device work alone, so ``cudaMemcpyAsync`` stays a runtime call.
    """

    name = "generic"
    args_categories: frozenset[str] = frozenset()
    launch_categories: frozenset[str] = frozenset()  # device work whose launch configuration the loader keeps
    # the spans whose args carry their launch's correlation id, which pairs a launch with its work where a trace's
    # flows were left out (a regular expression over categories, whole and without regard to case; empty for none)
    correlated_categories = ""
    category_kinds: dict[str, Kind] = {}
    role_kinds: dict[Role, Kind] = {}
    devices_by_process = False  # each device is a process of its own (a trace may hold several: one is analysed)

    def detect(self, trace: Trace) -> bool:
        return True

    def roles(self, trace: Trace) -> dict[int, Role]:
        return {}

    def category_kind(self, category: str) -> Kind:
        return self.category_kinds.get(category, Kind.OTHER)

    def name_kind(self, name: str) -> Kind:
        return vocabulary.kind_of_name(name)

    def kinds(self, trace: Trace) -> np.ndarray:
        by_category = _table([self.category_kind(c) for c in trace.cats])[trace.cat]
        by_role = _table([self.role_kinds.get(t.role, Kind.OTHER) for t in trace.tracks])[trace.track]
        by_name = _table([self.name_kind(n) for n in trace.names])[trace.name]
        return _of_pairs(_NAME_OVER, by_name, _of_pairs(_CATEGORY_OVER, by_category, by_role))


_DEVICE_REFINEMENTS = {Kind.H2D, Kind.D2H, Kind.D2D, Kind.MEMSET, Kind.COMMUNICATION}
_KIND_BITS = max(Kind).bit_length()  # a kind's code fits this many bits: two codes make one index into a pair's table


def _pair_table(kind_of: Callable[[Kind, Kind], Kind]) -> np.ndarray:
    """``kind_of(first, second)`` for every pair of kinds, indexed ``first << _KIND_BITS | second``."""
    table = np.zeros(1 << 2 * _KIND_BITS, dtype=np.uint8)
    for first, second in itertools.product(Kind, Kind):
        table[first << _KIND_BITS | second] = kind_of(first, second)
    return table


def _name_over(by_name: Kind, kind: Kind) -> Kind:
    """The kind a name implies where it implies one, but a name that only refines device work (a copy's direction, a
    collective) on device work alone."""
    refines_device = by_name in _DEVICE_REFINEMENTS
    applies = by_name != Kind.OTHER and (not refines_device or kind in _DEVICE_REFINEMENTS or kind == Kind.COMPUTE)
    return by_name if applies else kind


_CATEGORY_OVER = _pair_table(lambda by_category, by_role: by_category if by_category != Kind.OTHER else by_role)
_NAME_OVER = _pair_table(_name_over)


def _of_pairs(table: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per event, ``table``'s kind for its pair of kinds (:func:`_pair_table`): one lookup over the events, through
    an index of two bytes each (a kind's code is a byte, as the kinds column holds it)."""
    index = first.astype(np.uint16)
    index <<= _KIND_BITS
    index |= second
    return table[index]


class Generic(Dialect):
    """A trace no registered dialect recognises: roles from how its processes and threads are named.

    A process named after its device (``GPU 0``, ``HPU 0``, ``IPU 0 (…)``) holds device streams, with copy
    engines where a thread says so (``H2D link``); when the trace has one, every other process is the host.
    A trace with no device process keeps every track's role unknown.
    """

    name = "generic"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP, Role.H2D: Kind.H2D, Role.D2H: Kind.D2H}

    def roles(self, trace: Trace) -> dict[int, Role]:
        device = {t.id for t in trace.tracks if vocabulary.DEVICE_PROCESS.match(t.process_name)}
        if not device:
            return {}
        return {t.id: device_thread_role(t.thread_name) if t.id in device else Role.HOST for t in trace.tracks}


def device_work_per_track(trace: Trace) -> np.ndarray:
    """Per track, the time its device work takes (its spans on device tracks less marks, spans drawn over the work
    and waits): how busy each device, or each rank's devices, were, to choose the one a trace of several is read as."""
    work = trace.device_work(Role.DEVICE)
    return np.bincount(trace.track[work], weights=trace.dur[work], minlength=len(trace.tracks))


def device_thread_role(thread: str) -> Role:
    """A device process's thread: a copy engine where its name says which way (``H2D link``), else a stream."""
    if vocabulary.H2D.search(thread):
        return Role.H2D
    if vocabulary.D2H.search(thread):
        return Role.D2H
    return Role.DEVICE


def _table(kinds: list[Kind]) -> np.ndarray:
    return np.array(kinds, dtype=np.uint8) if kinds else np.zeros(1, dtype=np.uint8)
