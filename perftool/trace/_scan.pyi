"""Types of the compiled scanner (``_scan.c``)."""

def scan(
    piece: bytes | memoryview, /
) -> tuple[int, list[tuple[bytes | None, ...]], bytes, bytes, bytes, bytes, bytes, bytes, bytes] | None: ...
