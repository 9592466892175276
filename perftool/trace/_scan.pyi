"""Types of the compiled scanner (``_scan.c``)."""

import mmap
from typing import Any

import numpy as np

hash_seed: int  # drawn from os.urandom when the module loads: what the scanner returns never depends on it

def scan(
    piece: bytes | memoryview, /
) -> tuple[list[tuple[bytes | None, ...]], bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes] | None: ...
def slices(text: bytes | memoryview, spans: np.ndarray, /) -> list[bytes]: ...
def tails(text: bytes | memoryview, spans: np.ndarray, keys: tuple[bytes, ...], /) -> list[bytes]: ...
def tail_groups(text: bytes | memoryview, spans: np.ndarray, keys: tuple[bytes, ...], /) -> tuple[bytes, bytes]: ...
def line_events(data: bytes | mmap.mmap, begin: int, end: int, /) -> list[tuple[int, int, int, list[bytes]]] | None: ...
def stat_value(stat: bytes, /) -> tuple[int, int, Any] | None: ...  # the value's type is its field's
