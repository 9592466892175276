"""Helpers shared by the tests: write traces to disk and run the CLI as a user does; which tests run.

``python -m pytest`` runs the default suite: every test but those marked ``slow`` (half a second or more on
their own: a real engine such as Chromium or Dask, a subprocess stopped by a signal, a fit or sweep on the
emulator, inputs built to stress a limit), with the fuzz properties at the ``quick`` profile. ``--all`` runs
them too, the fuzz at the ``ci`` profile (the same examples every run). CI runs the default suite, then ``--all -m
"slow or fuzz"`` at the ``random`` profile: 250 new examples a property, drawn from a seed it prints, so that a failure
reproduces with ``HYPOTHESIS_PROFILE=random python -m pytest --all -m fuzz --hypothesis-seed=SEED``.
``HYPOTHESIS_PROFILE=long`` runs 5,000 fresh examples a property.
"""

from __future__ import annotations

import contextvars
import gzip
import json
import os
import signal
from pathlib import Path

import published_schemas
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings
from published_schemas import JUNIT_10, SARIF_2_1_0

from perftool.cli.main import cli
from perftool.common import limits
from perftool.trace import store

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
TORCH_FIXTURE = DATA / "torch_cpu_train.pt.trace.json.gz"

_REPRODUCIBLE = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "derandomize": True}
settings.register_profile("quick", max_examples=20, **_REPRODUCIBLE)  # the default suite's: the same ~220 examples
settings.register_profile("ci", max_examples=250, **_REPRODUCIBLE)  # --all: the same ~2,700 examples on every run
_RANDOM = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("random", max_examples=250, **_RANDOM)  # CI's: new examples each run, from --hypothesis-seed
settings.register_profile("long", max_examples=5000, **_RANDOM)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", help="run the slow tests too, and the fuzz at its ci profile")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: half a second or more on its own; run with --all (CI does)")
    config.addinivalue_line("markers", "fuzz: a fuzz property, of as many examples as the profile says")
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if config.getoption("--all") else "quick"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --all, the slow tests are deselected (pytest counts them as such)."""
    if config.getoption("--all"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)


@pytest.fixture(autouse=True)
def _arrays_in_memory_after_each_test():
    """A trace whose columns went to disk leaves numpy putting large arrays into files for the rest of its thread
    (:mod:`perftool.trace.store`): after each test the thread allocates as numpy does by default again."""
    yield
    for variable in contextvars.copy_context():
        if variable.name == "current_allocator":  # numpy's allocator (NEP 49), once a test has set it
            variable.set(contextvars.Context().run(variable.get))  # its value where nothing has set it


@pytest.fixture
def write_trace(tmp_path):
    """write_trace(document, name="t.json") -> path; gzip when the name ends in .gz; str/bytes as-is."""

    def write(document, name: str = "trace.json") -> Path:
        path = tmp_path / name
        if isinstance(document, bytes):
            data = document
        elif isinstance(document, str):
            data = document.encode()
        else:
            data = json.dumps(document).encode()
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        return path

    return write


@pytest.fixture(scope="session")
def schema_dir() -> Path:
    """Where downloaded schemas are kept between runs, outside the source tree."""
    folder = published_schemas.cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def sarif_validator(schema_dir):
    """A validator for the published SARIF 2.1.0 JSON schema."""
    import jsonschema

    return jsonschema.Draft4Validator(json.loads(SARIF_2_1_0.path(schema_dir).read_text()))


@pytest.fixture(scope="session")
def junit_schema(schema_dir):
    """The published JUnit XML schema (junit-10.xsd), as an xmlschema object."""
    import xmlschema

    return xmlschema.XMLSchema(JUNIT_10.path(schema_dir))


def error_line(result, *needles: str) -> str:
    """The one line a bad input gets (exit 2, no traceback), checked to hold each of ``needles``."""
    assert result.exit_code == 2, (result.exit_code, result.output[-500:])
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("perftool: error: ")
    for needle in needles:
        assert needle in line, line
    return line


@pytest.fixture
def run():
    """run(*args, input=bytes) -> click Result, with stdout and stderr kept apart."""

    def invoke(*args: str, input: bytes | None = None):
        return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke


def ctrl_c_as_at_a_terminal() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: Ctrl-C acts in the child even where the tests themselves run with
    it ignored (a background job of a shell script), which a child would inherit and, rightly, keep."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def leaving(size: str) -> str:
    """The ``--memory`` budget that leaves ``size`` (such as ``900kB``) for a small trace's columns once perftool's own
    process is counted."""
    return str(limits.PROCESS_MEMORY + limits.parse_size(size, "test"))


def spy_on_disk(monkeypatch, chunk_rows: int | None = None) -> list:
    """The column stores on disk made from now on (the real ones, recorded as they are made); ``chunk_rows`` makes
    their passes over the columns that short, so that every pass crosses chunks."""
    made = []
    real = store.OnDisk.__init__

    def recorded(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(store.OnDisk, "__init__", recorded)
    if chunk_rows:
        monkeypatch.setattr(store, "CHUNK_ROWS", chunk_rows)
    return made


def complete(name, ts, dur, pid=1, tid=1, cat="", **extra):
    """One 'X' event."""
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, **extra}


def kernel_steps(path, steps: int, slowdown: float = 1, names=("gemm_kernel",), marked: bool = True):
    """A trace of ``steps`` steps (marked ProfilerStep#N, or not), each running ``names`` as kernels one after
    another, ``slowdown`` times the base length; each step a microsecond longer than the last, so none tie."""
    events, slot = [], 8_000 / len(names)
    for step in range(steps):
        start = step * 10_000 * slowdown
        if marked:
            events.append(complete(f"ProfilerStep#{step}", start, 9_000 * slowdown, cat="user_annotation"))
        for i, name in enumerate(names):
            at = start + (100 + i * slot) * slowdown
            events.append(complete(name, at, (slot - 100) * slowdown + step, pid=0, tid=7, cat="kernel"))
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def thread_name(pid, tid, name):
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def process_name(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def scanned(run, path: str, *args: str) -> tuple[dict, dict]:
    """``perftool scan PATH --format json`` as a user runs it: the trace's summary, and its findings by rule id."""
    result = run("scan", path, "--format", "json", "--fail-on", "never", *args)
    assert result.exit_code == 0, result.output
    trace = json.loads(result.stdout)["traces"][0]
    return trace, {f["rule_id"]: f for f in trace["findings"]}


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if entry.isdigit() and int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except OSError:
            continue
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie, ended and not yet reaped, has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
