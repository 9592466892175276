"""perftool's own emulator traces: roles and kinds are written into the trace itself.

The emulator records ``{"perftool": {"emulator": {...}, "tracks": [{"pid", "tid", "role"}]}}`` at
the top level and uses the lower-case :class:`~perftool.trace.model.Kind` name as each event's
category, so nothing here is guessed.
"""

from __future__ import annotations

from perftool.dialects.base import Dialect
from perftool.trace.model import Kind, Role, Trace


class Emulator(Dialect):
    name = "emulator"
    category_kinds = {kind.name.lower(): kind for kind in Kind}
    # why a compile happened; what a collective moved; what a copy back to the host moved
    args_categories = frozenset({"compile", "communication", "d2h"})

    def detect(self, trace: Trace) -> bool:
        info = trace.metadata.get("perftool")
        return isinstance(info, dict) and "emulator" in info

    def roles(self, trace: Trace) -> dict[int, Role]:
        declared = {}
        for entry in trace.metadata["perftool"].get("tracks", []):
            try:
                declared[(entry["pid"], entry["tid"])] = Role(entry["role"])
            except (KeyError, TypeError, ValueError):
                continue
        return {t.id: declared[(t.pid, t.tid)] for t in trace.tracks if (t.pid, t.tid) in declared}
