"""Timeline analysis over the columnar trace model: intervals, steps, metrics."""

from perftool.analysis.metrics import METRICS, Metrics, OpStat, compute_metrics
from perftool.analysis.steps import Steps, detect_steps

__all__ = ["METRICS", "Metrics", "OpStat", "Steps", "compute_metrics", "detect_steps"]
