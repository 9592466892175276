"""What a scan says over its findings, in words every scan format shows alike: the largest cost, which each report
leads with, and a trace's gains beyond any one finding's (every predicted fix applied at once, and the settings a
sweep of the fitted emulator finds beyond them)."""

from __future__ import annotations

from perftool.common.units import duration, listed, percent, plural
from perftool.job.ranks import serving_stage
from perftool.rules.findings import Finding, JobView, ScanReport, TraceFindings, biggest_first

MAX_EARLIER_LISTED = 4  # traces a job view names of each kind it leaves out; the rest are counted
LESSER = 0.1  # a finding below this share of a device-bound step is said after that, not as the report's lead


def largest_cost(report: ScanReport) -> str | None:
    """The report's first line: the largest cost any finding names, whatever its severity ("60.0% of each step:
    communication not hidden behind compute — see PT011"), with the trace or rank where the report has several and
    why its finding is held at info where it is (too few steps to judge); led by the verdict that the trace is
    device-bound where its device computes most of the step and no finding costs more than :data:`LESSER` of it
    (:func:`device_bound`); None without either."""
    if report.job is None and len(report.traces) == 1 and (unjudged := report.traces[0].unjudged):
        return f"No steady state to judge: {unjudged} — profile steps after warm-up (see the notes)"
    found: list[tuple[Finding, str, bool]] = []  # each finding, where it is, whether its share is of steady steps
    if report.job is not None:
        found += [(finding, "the job", any(t.steps for t in report.traces)) for finding in report.job.findings]
    for trace in report.traces:
        where = f"rank {trace.rank}" if report.job is not None and trace.rank is not None else trace.path
        found += [(finding, where, bool(trace.steps)) for finding in trace.findings]
    bound = device_bound(report.traces[0]) if report.job is None and len(report.traces) == 1 else None
    if not found:
        return bound
    finding, where, of_steps = min(found, key=lambda item: biggest_first(item[0]))
    title = finding.title[:1].lower() + finding.title[1:] if finding.title[1:2].islower() else finding.title
    place = f" ({where})" if len(report.traces) > 1 else ""
    whole = "each step" if of_steps else "the trace"  # as each finding says its share
    held = f" (held at {finding.severity.value}: {finding.capped})" if finding.capped else ""  # a figure not judged
    lead = f"{percent(finding.impact.share)} of {whole}{place}: {title} — see {finding.rule_id}{held}"
    return f"{bound}; the largest finding, {lead}" if bound and finding.impact.share < LESSER else lead


def different_jobs_said(report: ScanReport) -> str:
    """Why a scan of traces found together sets none side by side: they are of different jobs (what tells them
    apart), so each is scanned on its own."""
    return (
        f"{plural(len(report.traces), 'trace')} of different jobs ({report.different_jobs}): each is scanned on its "
        "own, not as the ranks of one job"
    )


def folders_not_read_said(folders: list[str]) -> str | None:
    """The folders of a directory named that hold traces and were not read (a report's ``folders_not_read``), in
    words, with how to read them; None where there are none."""
    if not folders:
        return None
    names = listed([f"{folder}/" for folder in folders], MAX_EARLIER_LISTED)
    held = f"{names} holds" if len(folders) == 1 else f"{plural(len(folders), 'folder')} ({names}) hold"
    return (
        f"{held} traces of {'its' if len(folders) == 1 else 'their'} own, not read: a directory's folders are read "
        f"only where it holds no trace itself; scan {'it' if len(folders) == 1 else 'each'} on its own"
    )


def device_bound(trace: TraceFindings) -> str | None:
    """The verdict that the trace is device-bound (:attr:`TraceFindings.device_bound`), in words; None where it is
    not."""
    if trace.device_bound is None:
        return None
    whole = "each step" if trace.steps else "the trace"
    return (
        f"Device-bound: the device computes {percent(trace.device_bound)} of {whole}, so its kernels set the pace "
        "(perftool info lists them and how far each runs below the device's peaks)"
    )


def steps_said(trace: TraceFindings) -> str:
    """The trace's steady steps in a few words, as each report's header gives them ("12 steady steps")."""
    if trace.unjudged:
        return "no steady step (the capture is a model's warm-up)"
    return plural(trace.steps, "steady step") if trace.steps else "no step markers"


def unjudged_said(trace: TraceFindings) -> str | None:
    """Where no rule judged the trace (it holds no steady step), why, in place of its findings; None otherwise."""
    return "Not judged: the capture holds no steady step (see the notes)." if trace.unjudged else None


def mean_step(trace: TraceFindings) -> float | None:
    """The mean steady step a report's header shows, µs: None where there is none, or it is not a steady state's."""
    return None if trace.unjudged else trace.step_time_us


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


def holding_back(job: JobView) -> str | None:
    """Who holds a job back, in one sentence every format prints: a rank (or ranks) without a trace here that every
    rank here waits for, the rank the others wait for at the collectives (which need not have the longest step: its
    own wait is short), else the rank whose step is longest; None when none stands out."""
    absent = job.late_absent
    if absent is not None:
        least, most = (duration(us) for us in absent.wait_us)
        waits = least if least == most else f"{least} to {most}"
        said = (
            f"rank {absent.rank}, which has no trace here, arrives last at the collectives: every rank here waits "
            f"{waits} per step for it (their collectives' tasks name it); capture it with the others"
            if absent.rank is not None
            else f"ranks with no trace here arrive last at the collectives: every rank here waits {waits} per step in "
            "them while no data moves; capture every rank (from profiler level 1 the collectives' tasks name whom each "
            "wait is for)"
        )
        if job.slowest_rank is not None and job.held_back_us:
            said += f"; of the ranks here, rank {job.slowest_rank} arrives last ({duration(job.held_back_us)} per step)"
        return said
    if job.slowest_rank is None:
        return None
    if job.held_back_us:
        return (
            f"rank {job.slowest_rank} arrives last at the collectives: the others wait {duration(job.held_back_us)} "
            "per step for it"
        )
    return f"rank {job.slowest_rank} has the longest step, and no collective shows the others waiting for it"


def several_hosts(job: JobView) -> bool:
    """Whether the job's ranks ran on more than one host, as their traces or file names say: the ranks' tables then
    name each one's."""
    return len({row.host for row in job.ranks} - {None}) > 1


def capitalised(text: str) -> str:
    """A phrase as a sentence begins: its first letter a capital (``rank 3 has ...`` → ``Rank 3 has ...``)."""
    return text[:1].upper() + text[1:]


def left_out_said(job: JobView) -> list[str]:
    """The traces the job view leaves out, a sentence each kind that every format prints: the ranks' earlier
    captures, processes beside the ranks, merges of the ranks' traces, and other jobs' traces among them."""
    said = []
    if earlier := job.earlier_captures:
        captures = plural(len(earlier), "earlier capture")
        shown = listed(earlier, MAX_EARLIER_LISTED)
        if stages := _stages(job):
            said.append(
                f"the view compares the ranks' {stages[0]} captures (SGLang's --profile-by-stage writes each stage "
                f"apart); their {stages[1]} captures left out (scan them together for that stage's view): {shown}"
            )
        else:
            said.append(
                f"the view compares each rank's latest capture; {captures} left out (scan each on its own): {shown}"
            )
    if beside := job.beside_ranks:
        traces = plural(len(beside), "trace")
        said.append(
            f"{traces} of processes beside the ranks left out (no rank and no device work: a serving engine's front "
            f"end, such as vLLM's AsyncLLM, or a launcher; scan each on its own): {listed(beside, MAX_EARLIER_LISTED)}"
        )
    if merged := job.merged_traces:
        said.append(
            f"{plural(len(merged), 'trace')} merging the ranks' traces into one file left out (the view reads each "
            f"rank's own trace; scan each on its own): {listed(merged, MAX_EARLIER_LISTED)}"
        )
    if other := job.other_jobs:
        said.append(
            f"{plural(len(other), 'trace')} of {'another job' if len(other) == 1 else 'other jobs'} left out (no rank "
            "said, and a trace format, world size or device the ranks do not share; scan each on its own): "
            f"{listed(other, MAX_EARLIER_LISTED)}"
        )
    return said


def _stages(job: JobView) -> tuple[str, str] | None:
    """The serving stage the view's ranks were captured in and the one their earlier captures were, where the traces'
    names say each (SGLang's prefill and decode captures of one profile), the two apart; else None."""
    viewed = {serving_stage(row.path) or "" for row in job.ranks}
    left = {serving_stage(path) or "" for path in job.earlier_captures}
    if "" in viewed | left or len(viewed) != 1 or len(left) != 1 or viewed == left:
        return None
    return viewed.pop(), left.pop()


def rank_aligned(job: JobView, rank: int | None) -> bool:
    """Whether a job's rank was moved onto the reference rank's clock (its offset measured on shared collectives)."""
    alignment = job.alignment
    return rank is not None and rank in alignment.offsets_us and rank not in alignment.unaligned


def rank_label(rank: int | None, aligned: bool) -> str:
    """How a job's rank is named on its tracks in the annotated trace: one not aligned says it keeps its own clock."""
    return f"rank {rank}" if aligned else f"rank {rank} (its own clock: not aligned)"


def perfetto_track(finding: Finding) -> str:
    """The name of the track a finding's occurrences are drawn on in its annotated trace (``--format perfetto``)."""
    return f"{finding.rule_id} {finding.title}"
