"""The trace model and its loader."""

from perftool.trace.loader import load_trace
from perftool.trace.model import Counters, Kind, Phase, Role, Trace, Track

__all__ = ["Counters", "Kind", "Phase", "Role", "Trace", "Track", "load_trace"]
