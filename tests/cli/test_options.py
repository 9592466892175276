"""Every option and argument of every command, given a bad value: exit 2 and one line naming it, never a traceback
(which exits 1, what CI reads as a regression). The options are read from the command tree, so a new one is
walked too; a new free-text option needs its bad values here."""

from __future__ import annotations

import click
import pytest
from conftest import REPO, error_line

from perftool.cli.main import cli

SAMPLES = REPO / "sample_traces"
TRACE = SAMPLES / "npu" / "healthy.trace.json.gz"
OTHER_TRACE = SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz"
VALID = {  # a command line each command accepts, that a bad value is added to
    "info": [TRACE],
    "scan": [TRACE],
    "gate": [SAMPLES / "baselines" / "npu__healthy.findings.json", TRACE],
    "diff": [TRACE, OTHER_TRACE],
    "calibrate": [TRACE],
    "tune": [REPO / "examples" / "tune" / "npu.yaml"],
    "emulate": [SAMPLES / "npu" / "healthy.yaml"],
    "rules list": [],
    "rules explain": ["PT001"],
    "schema": [],
    "metrics": [],
    "knobs": [],
    "mcp": [],  # no options: it serves over stdio until the client closes it
}
TEXT = {  # the bad values of free-text options and arguments, by name
    "max_trace_bytes": ["abc", "-5", "0", "1e999GiB"],
    "memory": ["abc", "-5", "0", "1e999GiB"],
    "scheduler": ["localhost", "garbage", "tcp://[::1", "tls://host:8786", "host:99999"],
    "overrides": ["no_equals_sign", "loop_size=abc", "nope.nothing=1", "loop_size=nan"],
    "select": ["PT999", ""],
    "ignore": ["PT999", " , "],
    "at_batch": ["abc", "0=x.json", f"64={REPO / 'missing.json'}"],
    "rule": ["PT999", ""],
}
OUTPUTS = {"output", "write_best", "results", "emit_trace", "trace_file"}  # paths written


def commands(group: click.Group = cli, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


def bad_values(parameter: click.Parameter, tmp: str) -> list[str]:
    """Values of ``parameter``'s type that it must refuse."""
    kind = parameter.type
    if isinstance(kind, click.Choice):
        return ["bogus", ""]
    if isinstance(kind, click.IntRange):
        below = [] if kind.min is None else [str(kind.min - 1)]
        above = [] if kind.max is None else [str(kind.max + 1)]
        return ["abc", "1.5", *below, *above]
    if isinstance(kind, click.FloatRange):
        return ["abc", "nan", "inf", "-1", "1"]
    if isinstance(kind, click.Path):
        if parameter.name in OUTPUTS:
            return [f"{tmp}/no/such/folder/out", tmp]  # a folder that is not there; a folder, not a file
        return [f"{tmp}/missing", str(TRACE) if kind.dir_okay and not kind.file_okay else tmp]
    assert parameter.name in TEXT, f"{parameter.name}: a free-text parameter needs its bad values in TEXT"
    return TEXT[parameter.name]


CASES = [
    pytest.param(name, parameter.name, id=f"{name} {parameter.name}")
    for name, command in commands()
    for parameter in command.params
    if not getattr(parameter, "is_flag", False)
]


def test_every_command_is_walked():
    assert {name for name, _ in commands()} == set(VALID)


@pytest.mark.parametrize(("name", "parameter_name"), CASES)
def test_a_bad_value_is_exit_2_with_one_line(run, tmp_path, name, parameter_name):
    command = dict(commands())[name]
    parameter = next(p for p in command.params if p.name == parameter_name)
    for value in bad_values(parameter, str(tmp_path)):
        args = given(name, command, parameter, value)
        error_line(run(*args))
        assert list(tmp_path.iterdir()) == [], f"{args}: wrote {list(tmp_path.iterdir())}"


def given(name: str, command: click.Command, parameter: click.Parameter, value: str) -> list[str]:
    """The command's valid line with ``value`` for ``parameter``: in its place for an argument (the last of
    several traces), else added as the option."""
    line = [str(part) for part in VALID[name]]
    if not isinstance(parameter, click.Argument):
        return [*name.split(), *line, parameter.opts[-1], value]
    place = [p for p in command.params if isinstance(p, click.Argument)].index(parameter)
    if parameter.nargs == -1:
        place = len(line) - 1
    line[place : place + 1] = [value]
    return [*name.split(), *line]
