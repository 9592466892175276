"""Every output format: an entry point of the group ``perftool.formats`` named ``<what>.<format>``
(``scan.sarif``, ``info.json``) whose object renders what a command shows, its one argument.

``<what>`` is ``scan``, ``gate``, ``diff``, ``metrics``, ``knobs``, ``rules`` or ``rule`` (the command's result),
or ``info``, ``job-info``, ``emulate``, ``tune`` or ``calibrate`` (a view of :mod:`perftool.report.views`).
perftool registers its own formats in its ``pyproject.toml``; another package adds one the same way, as
bandit's formatters do. A renderer returns text (written as it is), blocks of bytes (an iterator, written
each as it is made: a document too large to hold whole) or a rich renderable (printed for people, or
flattened to text for ``-o``); :func:`emit` writes any of them to stdout or atomically to the output file.
Only the renderer asked for is imported.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from perftool.common import limits
from perftool.common.errors import PerftoolError
from perftool.common.output import write_blocks, write_text
from perftool.common.plugins import registered

GROUP = "perftool.formats"
SHOWN = ("scan", "gate", "diff", "info", "job-info", "emulate", "tune", "calibrate", "metrics", "knobs", "rules",
         "rule")  # fmt: skip


def formats(shown: str) -> list[str]:
    """The format names registered for ``shown`` (one of :data:`SHOWN`), text first."""
    names = [entry.name.partition(".")[2] for entry in registered(GROUP) if entry.name.startswith(f"{shown}.")]
    return sorted(dict.fromkeys(names), key=lambda name: name != "text")


def render_as(shown: str, value: Any, fmt: str) -> Any:
    """``value`` (what ``shown`` names) rendered in ``fmt``: text, blocks of bytes or a rich renderable."""
    entry = next((e for e in registered(GROUP) if e.name == f"{shown}.{fmt}"), None)
    if entry is None:
        raise PerftoolError(f"no format {fmt!r} for {shown} (registered: {', '.join(formats(shown))})")
    try:
        render = entry.load()
    except Exception as exc:  # a plug-in that does not import: its package's fault, named in one line
        raise PerftoolError(
            f"the {fmt} format ({entry.value}) could not be loaded: {type(exc).__name__}: {exc}"
        ) from None
    return render(value)


def emit(shown: str, value: Any, fmt: str, output: str | None = None) -> None:
    """Render ``value`` (what ``shown`` names) in ``fmt`` and write it: to stdout, or atomically to ``output``."""
    rendered = render_as(shown, value, fmt)
    if output is None:
        if sys.stdout is None:  # started with its standard output closed: the report would be lost without a word
            raise PerftoolError("standard output is closed: the report has nowhere to go (give -o FILE)")
        try:
            _write(rendered, None)
            sys.stdout.flush()
        except OSError as exc:  # disk full, EIO, a closed pipe: the output is lost, said in one line (exit 2)
            sys.stdout = open(os.devnull, "w")  # nothing more to write there, not even at exit
            raise PerftoolError(f"standard output: cannot write: {exc.strerror or exc}") from None
        return
    _write(rendered, output)
    _said(output)


def _said(output: str) -> None:
    """One line on standard error for a file a command wrote with ``-o``: what it is, and its size."""
    try:
        info = os.stat(output)
        size = f" ({limits.size_text(info.st_size)})" if stat.S_ISREG(info.st_mode) else ""
    except OSError:
        size = ""
    print(f"perftool: wrote {output}{size}", file=sys.stderr)


def _write(rendered: Any, output: str | None) -> None:
    """A rendered report to ``output`` (a file, written atomically; gzipped where its name ends in ``.gz``) or
    standard output."""
    if output is not None and output.endswith(".gz") and isinstance(rendered, str | Iterator):
        write_blocks(_gzipped([rendered.encode()] if isinstance(rendered, str) else rendered), output)
    elif isinstance(rendered, str):
        write_text(rendered, output)
    elif isinstance(rendered, Iterator):
        write_blocks(rendered, output)
    else:  # a rich renderable: rich is loaded only for those (JSON and the other documents do without it)
        from rich.console import Console

        from perftool.report import console

        if output:
            write_text(console.plain(rendered), output)
        else:
            Console().print(rendered)


def _gzipped(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """``blocks`` as one gzip stream, compressed as they come."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    for block in blocks:
        if packed := packer.compress(block):
            yield packed
    yield packer.flush()
