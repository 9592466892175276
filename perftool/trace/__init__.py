"""The trace model and its reader (roles and kinds come from :mod:`perftool.pipeline.read`)."""

from perftool.trace.loader import read_trace
from perftool.trace.model import Counters, Kind, Phase, Role, Trace, Track

__all__ = ["Counters", "Kind", "Phase", "Role", "Trace", "Track", "read_trace"]
