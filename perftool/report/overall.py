"""A trace's gains beyond any one finding's, in words every scan format shows alike: every predicted fix applied at
once, and the settings a sweep of the fitted emulator finds beyond them."""

from __future__ import annotations

from perftool.rules.findings import TraceFindings


def overall_gains(trace: TraceFindings) -> list[tuple[str, str]]:
    """(label, words) for each of the trace's overall gains, in the order they are shown."""
    found = []
    if trace.together is not None:
        found.append(("together", f"every predicted fix here, applied at once: {trace.together.text}"))
    if trace.beyond is not None:
        found.append(
            (
                "better",
                f"a sweep of the emulator fitted to this trace finds more than every fix here: {trace.beyond.text}",
            )
        )
    return found
