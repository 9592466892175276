"""The compiled scanner (perftool/trace/_scan.c) reads what msgspec reads, as msgspec reads it.

Every piece of every bundled sample and real capture, and random events of every field type, formatting and
escape, give the same Part both ways; what the scanner is not sure of it leaves to msgspec, so a trace reads the same,
error messages included, whichever path a piece took.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import mutated
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

from perftool.common.errors import TraceError
from perftool.pipeline.read import dialects, load_trace
from perftool.trace import decode, events
from perftool.trace.loader import read_trace
from perftool.trace.parts import Part, make_part

pytestmark = pytest.mark.skipif(not events.COMPILED, reason="the scanner was not compiled (no C compiler at install)")

TRACES = (
    sorted((REPO / "sample_traces").rglob("*.trace.json*"))
    + sorted((REPO / "tests" / "data").glob("*.json*"))
    + sorted((REPO / "tests" / "data" / "real").glob("*.json.gz"))
    + sorted((REPO / "tests" / "data" / "vocab").glob("*.json*"))
)
KEEP = dialects.kept_args()


def pieces_of(path: Path) -> list[bytes]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return [bytes(piece) for piece in decode.stream_pieces(fh.read, {})]


def same_part(first: Part, second: Part) -> None:
    for field, value in vars(first).items():
        other = getattr(second, field)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype, field
            np.testing.assert_array_equal(value, other, err_msg=field)
            if value.dtype.kind == "f":  # the sign of a zero too
                np.testing.assert_array_equal(np.signbit(value), np.signbit(other), err_msg=field)
        else:  # a counter event without a time has a NaN one, equal to none: compared by its text
            assert repr(value) == repr(other), field


def by_msgspec(piece: bytes) -> events.Events:
    return events.events_of(decode.decode_piece(piece) if piece.strip() else [])


def test_every_sample_and_real_capture_scans_as_msgspec_decodes_it():
    assert len(TRACES) > 40
    scanned = 0
    for path in TRACES:
        for piece in pieces_of(path):
            fast = events.scan_piece(piece)
            try:
                slow = by_msgspec(piece)
            except decode.NeedsExactPath:  # a layout the cutting does not expect: the whole document is decoded
                assert fast is None
                continue
            assert fast is not None, f"{path.name}: the scanner left a piece of a real trace to msgspec"
            same_part(make_part(fast, KEEP), make_part(slow, KEEP))
            scanned += len(fast)
    assert scanned > 400_000  # events


# --- random events ----------------------------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, max_value=1e17).map(lambda x: round(x, 3)),
    st.sampled_from([0, -0.0, 1e-320, 2**53, 2**53 + 1, 1e400, 123456789012345678]),
)
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "aten::mm", 'a"b', "a\\b", "tab\there", "\u00e9\u4e2d", "\U0001f680", "\ud800", "\x00"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3))
FIELDS = {
    "ph": st.one_of(st.sampled_from(list("XBEiICsftbenMSTpF")), TEXT, SCALARS),
    "name": st.one_of(st.sampled_from(["ProfilerStep#1", "gemm", "thread_name"]), TEXT, SCALARS),
    "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "ac2g"]), TEXT, SCALARS),
    "pid": st.one_of(st.integers(-5, 5), st.integers(-(2**70), 2**70), TEXT, SCALARS),
    "tid": st.one_of(st.integers(-5, 5), TEXT, SCALARS),
    "ts": st.one_of(NUMBERS, NUMBERS.map(str), TEXT, SCALARS),
    "dur": st.one_of(NUMBERS, NUMBERS.map(str), SCALARS),
    "id": st.one_of(st.integers(-3, 2**64), TEXT, SCALARS),
    "args": VALUES,
    "bp": VALUES,
    **dict.fromkeys(["phase", "pidx", "t", "tsc", "durations", "i", "names", "arg"], SCALARS),  # read as no field
}
EVENT = st.fixed_dictionaries({}, optional=FIELDS)


def written(data: st.DataObject, event: dict) -> str:
    """An event as a profiler might write it: any spacing (before a colon too), any escaping, now and then a key twice
    or escaped."""
    spacing = data.draw(st.sampled_from(["", " ", "\n    ", "\t"]))
    colon = data.draw(st.sampled_from([":", " :", "\n:"]))
    ascii_only = data.draw(st.booleans())
    members = [f"{json.dumps(k)}{colon}{spacing}{json.dumps(v, ensure_ascii=ascii_only)}" for k, v in event.items()]
    if members and data.draw(st.integers(0, 9)) == 0:
        members.append(data.draw(st.sampled_from(members)))  # a key twice
    if data.draw(st.integers(0, 19)) == 0:
        members.append('"p\\u0068":"X"')  # a key written with an escape
    return "{" + ("," + spacing).join(members) + "}"


@given(st.data(), st.lists(EVENT, max_size=6))
def test_random_events_scan_as_msgspec_decodes_them_or_are_left_to_it(data, random_events):
    """Where msgspec refuses a piece the scanner declines it; where the scanner reads one, its Part is msgspec's."""
    separator = data.draw(st.sampled_from([",", ",\n  ", " , "]))
    piece = separator.join(written(data, e) for e in random_events).encode("utf-8", "surrogatepass")  # bad UTF-8 too
    try:
        expected: events.Events | None = by_msgspec(piece)
        part = make_part(expected, KEEP)
    except (decode.NeedsExactPath, events.PieceError):
        expected = None
    fast = events.scan_piece(piece)
    if fast is None:
        return
    assert expected is not None, piece
    same_part(make_part(fast, KEEP), part)


@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**53), 2**53)), max_size=50))
def test_times_are_the_doubles_msgspec_reads(times):
    piece = ",".join(f'{{"ph":"X","ts":{json.dumps(t)},"dur":"{t!r}"}}' for t in times).encode()
    fast = events.scan_piece(piece)
    if fast is None:  # a number past what a double holds, or a string of a Python repr that is no JSON number
        assert any(math.isinf(float(t)) or "e" in repr(t) or "inf" in repr(t) for t in times)
        return
    slow = by_msgspec(piece)
    np.testing.assert_array_equal(fast.ts, slow.ts)
    np.testing.assert_array_equal(np.signbit(fast.ts), np.signbit(slow.ts))
    np.testing.assert_array_equal(fast.dur, slow.dur)


@pytest.mark.parametrize(
    "event",
    [
        '{"ph":"X","ph":"B"}',  # msgspec keeps the last
        '{"p\\u0068":"X"}',  # an escaped key
        '{"ph":"X","pid":99999999999999999999}',  # past an int64
        '{"ph":"X","ts":9007199254740993}',  # past 2^53: msgspec rounds it
        '{"ph":"X","ts":1e400}',
        '{"ph":"X","dur":1e-400}',
        '{"ph":"X","name":"\\ud83d\\ude80"}',  # a surrogate pair
        '{"ph":"X","bp":"\\ud800"}',  # a lone surrogate, even in a field perftool skips: msgspec refuses it
        '{"ph":"X","args":{"a":["\\udc00"]}}',
        '{"ph":"X","pid":1.0}',
        '{"ph":"X","ts":" 1.5"}',
        '{"ph":"X","args":' + "[" * 70 + "]" * 70 + "}",
    ],
)
def test_what_the_scanner_is_unsure_of_is_msgspec_s_to_read(event):
    assert events.scan_piece(event.encode()) is None


def test_a_key_written_twice_reads_as_msgspec_reads_it():
    assert events.read_piece(b'{"ph":"X","ph":"B","name":"k"}').distinct == [("B", "k", "", 0, 0)]


@pytest.mark.parametrize(
    "body, problem",
    [
        (b'{"ph":"X","name":"k\xff","ts":1,"dur":1}', "not valid UTF-8 at line 1, column 406: byte 0xff"),
        (b'{"ph":"X","name":"k","ts":"soon","dur":1}', "event 10, field 'ts': expected a number, got 'soon'"),
        (b'{"ph":"X","name":"k","ts":1,"dur":1,}', "not valid JSON at line 1, column 423: trailing comma in object"),
        (b'{"ph":"X","name":"k","ts":1,"dur":[1]}', "event 10, field 'dur': expected float | str, got array"),
    ],
)
def test_a_bad_event_is_the_same_one_line_whichever_path_reads_it(tmp_path, body, problem):
    """The events around it are the scanner's to read; the bad one is msgspec's, which names it as it always did."""
    good = b'{"ph":"X","name":"k","ts":1,"dur":1}'
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents":[' + b",".join([good] * 10 + [body] + [good]) + b"]}")
    assert events.scan_piece(good) is not None and events.scan_piece(body) is None
    with pytest.raises(TraceError) as raised:
        read_trace(path)
    assert raised.value.problem == problem


def test_a_trace_of_escaped_names_reads_as_written(tmp_path):
    """Names the scanner sees as different bytes but that decode alike are one name, as msgspec makes them."""
    events_written = [
        {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0},
        {"ph": "X", "name": "ge\\u006dm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 4.0, "dur": 2.0},
        {"ph": "X", "name": "caf\u00e9 \u4e2d", "cat": "kernel", "pid": 0, "tid": 7, "ts": 7.0, "dur": 2.0},
    ]
    text = json.dumps({"traceEvents": events_written}, ensure_ascii=False).replace("\\\\u006d", "\\u006d")
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    trace = load_trace(path)
    assert sorted(set(trace.names)) == sorted({"gemm", "caf\u00e9 \u4e2d"})
    assert len(trace) == 3


def test_valid_events_of_every_field_type_are_the_scanner_s_to_read():
    """Events the scanner must not decline (or the property above would test little): string or integer ids and
    pids, string times, escapes and non-ASCII text in names and args, nested args, unknown fields, any spacing."""
    rng = np.random.default_rng(7)
    names = ["aten::mm", 'say "hi"', "back\\slash", "caf\u00e9 \u4e2d \U0001f680", "tab\tnew\nline", "\u0001"]
    written = []
    for i in range(2000):
        event: dict[str, Any] = {
            "ph": str(rng.choice(list("XBEiCsfbeM"))),
            "name": names[i % len(names)],
            "cat": ["kernel", "cpu_op", "", "ac2g"][i % 4],
            "pid": [0, -1, "GPU 0", 123456789012345678][i % 4],
            "tid": [7, "stream 7", 2**40][i % 3],
            "ts": [float(rng.uniform(0, 1e12)), int(rng.integers(0, 2**53)), f"{rng.uniform(0, 1e6):.3f}"][i % 3],
            "dur": [round(float(rng.uniform(0, 100)), 3), 0, -0.0, 1e-7][i % 4],
            "id": [i, -i, f"0x{i:x}", None][i % 4],
            "args": {"External id": i, "grid": [1, 2, 3], "nested": {"x": [True, False, None]}, "name": names[i % 6]},
            "bp": "e",
        }
        written.append(json.dumps(event, ensure_ascii=i % 2 == 0, indent=i % 3 or None))
    piece = ",\n".join(written).encode()
    fast = events.scan_piece(piece)
    assert fast is not None and len(fast) == 2000
    same_part(make_part(fast, KEEP), make_part(by_msgspec(piece), KEEP))


def test_without_the_scanner_a_trace_loads_the_same(monkeypatch):
    """An install that could not compile it reads every piece with msgspec, to the same columns."""
    path = REPO / "tests" / "data" / "real" / "ddp_v100_rank1.json.gz"
    compiled = load_trace(path, workers=1)
    monkeypatch.setattr(events, "_scan", None)
    assert events.scan_piece(b'{"ph":"X"}') is None
    without = load_trace(path, workers=1)
    for column in ("ts", "dur", "phase", "track", "name", "cat", "flow_id", "order", "args_ref", "kind"):
        np.testing.assert_array_equal(getattr(compiled, column), getattr(without, column), err_msg=column)
    assert (compiled.names, compiled.kept_args, compiled.metadata) == (
        without.names,
        without.kept_args,
        without.metadata,
    )


@functools.cache
def real_runs() -> list[bytes]:
    """Runs of three whole events cut from every real capture: the seeds the mutations below start from."""
    runs = []
    for path in sorted((REPO / "tests" / "data" / "real").glob("*.json.gz")):
        for piece in pieces_of(path):
            ends = [i for i in range(len(piece)) if piece.startswith(b"},", i)][:200]
            runs += [piece[a + 2 : b + 1].strip() for a, b in zip(ends[::7], ends[3::7])]
    return runs


SPLICES = [b'"ts":1e999,', b'"ph":"X",', b'"args":' + b"[" * 70, b"\\ud800", b'"id":"x",', b'"pid":1.5,']
MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["flip", "insert", "delete", "truncate", "splice"]),
        st.floats(0, 1),
        st.sampled_from([*b'{}[]",:\\ 0123456789.eE-+tfnu', 0, 0xFF, 0xC3, 0x80]),
        st.sampled_from(SPLICES),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.fuzz
@given(st.data(), MUTATIONS)
def test_mutated_real_events_scan_as_msgspec_decodes_them_or_are_left_to_it(data, mutations):
    """Byte flips, insertions, deletions, truncations and splices of real events: the scanner never reads past what
    it was given (it would crash the process), and where it reads a piece, its Part is msgspec's."""
    piece = mutated(data.draw(st.sampled_from(real_runs())), mutations)
    fast = events.scan_piece(piece)
    if fast is None:
        return
    same_part(make_part(fast, KEEP), make_part(by_msgspec(piece), KEEP))


_KEYS_LIKE_CORRELATION = ['"correlation"', '"correl\\u0061tion"', '"Correlation"', '"correlation "', '"x"', '"\u00e9"']
_CORRELATION_VALUES = st.one_of(st.integers(-5, 2**64), st.integers(0, 10**19).map(str), VALUES)


@given(
    st.data(),
    st.lists(st.lists(st.tuples(st.sampled_from(_KEYS_LIKE_CORRELATION), _CORRELATION_VALUES), max_size=4), max_size=5),
)
def test_launches_correlation_ids_scan_as_msgspec_reads_them(data, objects):
    """A launch's and its kernel's correlation id (their args' top-level ``correlation``, read for each one) is the
    id msgspec reads, where the scanner reads it and where it leaves it to msgspec: a key repeated, escaped, in
    another case, nested; a value negative, of 19 digits and more, a string, a fraction, an object."""
    spacing = data.draw(st.sampled_from(["", " ", "\n  "]))
    pieces = []
    for members in objects:
        args = "{" + f",{spacing}".join(f"{key}{spacing}:{spacing}{json.dumps(value)}" for key, value in members) + "}"
        category = data.draw(st.sampled_from(["kernel", "cuda_runtime", "cpu_op"]))
        pieces.append(f'{{"ph":"X","name":"k","cat":"{category}","pid":0,"tid":7,"ts":1,"dur":1,"args":{args}}}')
    piece = ",".join(pieces).encode()
    fast = events.scan_piece(piece)
    if fast is None:  # a lone surrogate, escaped: msgspec's to read
        return
    same_part(make_part(fast, KEEP), make_part(by_msgspec(piece), KEEP))


@pytest.mark.parametrize(
    ("args", "found"),
    [
        ('{"External id": 9, "cbid": 211, "correlation": 8218}', 8218),  # Kineto's, as it writes a launch's
        ('{"correlation" : 0 }', 0),
        ('{"correl\\u0061tion": 4}', 4),  # an escaped key: the scanner leaves it to msgspec
        ('{"correlation": 1, "correlation": 2}', 2),  # the last, as msgspec keeps it
        ('{"correlation": 1, "correlation": "2"}', -1),
        ('{"correlation": "5"}', -1),
        ('{"correlation": -2}', -1),
        ('{"correlation": 1.5}', -1),
        ('{"correlation": 1e3}', -1),
        ('{"correlation": 1234567890123456789}', -1),  # 19 digits: no tracer's counter, perhaps no int64
        ('{"x": {"correlation": 3}}', -1),  # nested: not the span's
        ('{"x": "correlation", "y": ["correlation", 3]}', -1),
        ("{}", -1),
        ("[1]", -1),
    ],
)
def test_a_span_s_correlation_id_is_its_args_top_level_integer(args, found):
    piece = f'{{"ph":"X","name":"k","cat":"kernel","pid":0,"tid":7,"ts":1,"dur":1,"args":{args}}}'.encode()
    for read in (events.scan_piece(piece), by_msgspec(piece)):
        assert read is not None
        assert read.reader.correlations(np.array([0])).tolist() == [found]


_FRAGMENTS = ['"Input Dims"', '"Input type"', '"grid"', '"block"', '"', "\\", '\\"', '"Input', ' Dims"', "x", ": [1], "]


@given(
    st.lists(st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join), max_size=8),
    st.sampled_from([(b'"Input Dims"', b'"Input type"'), (b'"grid"', b'"block"', b'"Input"'), (b"Dims", b"x")]),
)
def test_tails_cut_each_span_from_its_first_key_as_python_does(texts, keys):
    """The scanner's tails, whose keys that begin with a quote are looked for at each quote in one pass (others with
    a search per key), are where Python's search puts them: quotes escaped or inside keys, keys cut short, none; and
    its groups of them (made without making the tails) are the groups of equal tails."""
    text = "".join(texts).encode()
    bounds = np.cumsum([0] + [len(t.encode()) for t in texts])
    spans = np.array(list(zip(bounds[:-1], bounds[1:])), dtype=np.int64).reshape(-1, 2)
    expected = [events._from_first_key(text[a:b], keys) for a, b in spans.tolist()]
    assert events._tails(text, spans, keys) == expected
    groups, firsts = events._tail_groups(text, spans, keys)
    distinct = list(dict.fromkeys(expected))  # equal tails one group, numbered as they first occur
    assert np.frombuffer(groups, np.int32).tolist() == [distinct.index(tail) for tail in expected]
    assert np.frombuffer(firsts, np.int64).tolist() == [expected.index(tail) for tail in distinct]


def test_the_scanner_s_hash_is_seeded_per_process_and_its_result_never_depends_on_it():
    """Names chosen to collide under the scanner's fixed hash put every signature in one probe chain (a trace of
    them scanned 7-26x slower; hardening round 4, D13). Each process draws its own seed, so no set of names
    collides in every process, and the columns scanned are the same whatever the seed."""
    import subprocess
    import sys

    program = (
        "import hashlib, sys; from perftool.trace import _scan; "
        "piece = sys.stdin.buffer.read(); result = _scan.scan(piece); assert result is not None; "
        "print(_scan.hash_seed, hashlib.sha256(repr(result).encode()).hexdigest())"
    )
    names = [f"kernel_{i}" for i in range(2_000)]
    piece = ",".join(
        json.dumps({"ph": "X", "name": names[i % len(names)], "pid": 1, "tid": i % 7, "ts": i, "dur": 1})
        for i in range(20_000)
    ).encode()
    runs = [subprocess.run([sys.executable, "-c", program], input=piece, capture_output=True, check=True).stdout.split()
            for _ in range(3)]  # fmt: skip
    assert len({seed for seed, _ in runs}) == 3
    assert len({digest for _, digest in runs}) == 1
