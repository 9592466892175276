"""A progress bar on stderr for long work; nothing at all when stderr is not a terminal or it is turned off."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

COUNT = "{task.completed:,.0f} of {task.total:,.0f} configurations"  # thousands separators, and what is counted


class SweepProgress:
    """Counts a sweep's configurations: evaluated and pruned for exhaustive, evaluated against the budget otherwise."""

    def __init__(self, enabled: bool | None = None) -> None:
        console = Console(stderr=True, force_terminal=enabled or None)  # --progress: draw even when piped
        self.enabled = console.is_terminal if enabled is None else enabled
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn(COUNT),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("· left"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not self.enabled,
        )
        self._task: TaskID | None = None
        self._count_pruned = False

    def __enter__(self) -> SweepProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)

    def start(self, strategy: str, total: int) -> None:
        self._count_pruned = strategy == "exhaustive"
        self._task = self._bar.add_task(f"{strategy} sweep", total=total)

    def advance(self, evaluations: int, pruned: int) -> None:
        if self._task is not None:
            self._bar.update(self._task, completed=evaluations + (pruned if self._count_pruned else 0))
