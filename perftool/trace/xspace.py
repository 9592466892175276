"""The raw XSpace a JAX or TensorFlow profile holds (``*.xplane.pb``, what TensorBoard and XProf read), read through
the official ``xprof`` package: its trace viewer turns the planes into the same Chrome trace ``jax.profiler``
writes beside them, which the xla dialect reads. ``xprof`` is an optional extra (``xla``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from perftool.common.errors import TraceError
from perftool.trace.decode import RawEvent, exact_batches
from perftool.trace.workers import stderr_unseen

INSTALL = "pip install xprof (perftool's xla extra)"


def batches(path: str, metadata: dict[str, Any]) -> Iterator[list[RawEvent]]:
    """The events of the XSpace at ``path``, as xprof's trace viewer gives them, in batches."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise TraceError(
            path, f"an XSpace is read through the xprof package, which is not installed: {INSTALL}"
        ) from None
    with stderr_unseen():  # the converter's C++ logging, a line per stage
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer", {})
        except Exception as exc:  # noqa: BLE001 - whatever the converter raises, the user gets one line
            raise TraceError(
                path, f"xprof could not read this XSpace: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            ) from None
    if not data:
        raise TraceError(path, "xprof could not read this XSpace (a truncated or foreign protobuf?)")
    yield from exact_batches(path, data.encode() if isinstance(data, str) else data, metadata)
