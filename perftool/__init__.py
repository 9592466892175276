"""perftool: performance tuning and profiling for training jobs on ML accelerators."""

__version__ = "0.1.0"
