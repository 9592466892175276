"""``diff --format json``: the ``perftool.diff/1`` document, its rows written a block at a time.

A diff of millions of distinct names has millions of rows: its JSON is hundreds of bytes a row, so it is never
made whole. The document is written around empty rows, and each diff's rows are put in their place a block at a
time; the bytes are those ``model_dump_json(by_alias=True, indent=2)`` gives.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import TypeAdapter

from perftool.diff.compare import Row
from perftool.diff.files import DiffResult

ROWS_PER_BLOCK = 20_000
_DOCUMENT = TypeAdapter(DiffResult)
_ROWS = TypeAdapter(list[Row])
_ROWS_INDENT = b" " * 6  # a diff's fields, inside the document's list of diffs
_EMPTY_ROWS = b"\n" + _ROWS_INDENT + b'"rows": [],\n'  # no string holds a newline: only the field itself matches


def render(result: DiffResult) -> Iterator[bytes]:
    """The document's bytes, in blocks."""
    outline = result.model_copy(update={"diffs": [diff.model_copy(update={"rows": []}) for diff in result.diffs]})
    document = _DOCUMENT.dump_json(outline, by_alias=True, indent=2)
    start = 0
    for diff in result.diffs:
        at = document.index(_EMPTY_ROWS, start) + len(_EMPTY_ROWS) - len(b"[],\n")
        yield document[start:at]
        start = at + len(b"[]")
        if diff.rows:
            yield b"[\n"
            yield from _rows(diff.rows)
            yield b"\n" + _ROWS_INDENT + b"]"
        else:
            yield b"[]"
    yield document[start:]
    yield b"\n"


def _rows(rows: list[Row]) -> Iterator[bytes]:
    """The rows as the document lays them out, a block at a time, without the brackets around them."""
    for first in range(0, len(rows), ROWS_PER_BLOCK):
        block = _ROWS.dump_json(rows[first : first + ROWS_PER_BLOCK], by_alias=True, indent=2)
        inner = block[len(b"[\n") : -len(b"\n]")]  # each row indented by two, as the rows of a bare list
        yield (b",\n" if first else b"") + _ROWS_INDENT + inner.replace(b"\n", b"\n" + _ROWS_INDENT)
