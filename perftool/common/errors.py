"""Errors that end a command with exit code 2 and a one-line message.

A message names what the caller can change by the API's parameter, in backticks (:func:`parameter`):
``pass `allow_mismatch=True` to compare them anyway``. The command line shows its option there instead
(``pass --allow-mismatch``), so each says what its user types.
"""

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

PARAMETER = re.compile(r"`(\w+)(=True)?`")  # how a message names a parameter: `memory`, `allow_mismatch=True`


def parameter(name: str, flag_only: bool = False) -> str:
    """How a message names the API parameter ``name`` (``flag_only``: one that is set to True, an option without a
    value on the command line)."""
    return f"`{name}=True`" if flag_only else f"`{name}`"


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (they may come from the input)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class PerftoolError(Exception):
    """Bad usage or bad input: reported as one line, exit code 2, never a traceback."""

    exit_code = 2


def invalid_arguments(function: Callable[..., Any], errors: Sequence[Mapping[str, Any]]) -> PerftoolError:
    """The one line for a call of ``function`` whose arguments failed validation (pydantic's ``errors()``): the
    first wrong parameter, what it should be and what it got, and how many more are wrong."""
    wrong = dict.fromkeys(_argument(function, error["loc"]) for error in errors)  # in order, once each
    first, more = errors[0], f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
    return PerftoolError(f"{function.__name__}(): {next(iter(wrong))}: {first['msg']} (got {first['input']!r}){more}")


def _argument(function: Callable[..., Any], where: tuple[int | str, ...]) -> str:
    """``traces[0]``, ``select[2]``, ``jobs``: the argument a validation error points at (pydantic's location
    names a positional argument by its index and adds the member of a union it tried)."""
    parameters = list(inspect.signature(function).parameters.values())
    head, *rest = where or ("arguments",)
    name = str(head)
    if isinstance(head, int):
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = next((p.name for p in parameters if p.kind == p.VAR_POSITIONAL), "arguments")
        name = positional[head].name if head < len(positional) else f"{varargs}[{head - len(positional)}]"
    return name + "".join(f"[{part}]" for part in rest if isinstance(part, int))


class PerftoolWarning(UserWarning):
    """Part of the input could not be used; the result stands for the rest (the API's warning, where the command
    line prints an error line and exits 2)."""


class TraceError(PerftoolError):
    """A trace file that cannot be read; the message names the file and, where known, the place."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # rebuilt whole where it crosses processes (Dask, pipes)
        return type(self), (self.path, self.problem)
