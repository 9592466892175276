"""The words perftool's commands and API take for a choice, in a module that loads nothing else, so the command line
offers them before it has loaded the work they choose."""

from __future__ import annotations

from typing import Literal, get_args

Level = Literal["kernel", "op", "annotation", "category", "track"]  # what diff compares per
LEVELS: tuple[str, ...] = get_args(Level)
Strategy = Literal["auto", "exhaustive", "local"]  # how tune searches
STRATEGIES: tuple[str, ...] = get_args(Strategy)
FailOn = Literal["info", "warning", "error", "never"]  # the severity that fails a scan or gate
FAIL_ON: tuple[str, ...] = get_args(FailOn)
