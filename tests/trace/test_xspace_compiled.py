"""The compiled readers of an XSpace's lines and stats (``perftool/trace/_scan.c``): the same events as the Python
reader wherever they read, and no reading at all (None, the Python reader then decides) of bytes that break the
schema."""

from __future__ import annotations

import functools
import struct

import pytest
from builders import mutated
from conftest import DATA
from hypothesis import given
from hypothesis import strategies as st
from xspace_synth import event, gpu_capture, line, message, number, plane, space, stat, varint

from perftool.trace import xspace

pytestmark = pytest.mark.skipif(
    xspace._compiled_line_events is None, reason="the scanner was not compiled (no C compiler at install)"
)
XSPACE = DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb"
NAMES = {1: "name", 2: "correlation_id", 3: "kernel_details", 4: "index", 7: "ref target"}


def _events(path, monkeypatch, compiled: bool) -> list:
    """Every event of the XSpace at ``path``, read with the compiled readers or without them."""
    if not compiled:
        monkeypatch.setattr(xspace, "_compiled_line_events", None)
        monkeypatch.setattr(xspace, "_compiled_stat_value", None)
    space_of = xspace.layout(str(path), {})
    events = [event for task in space_of.tasks for event in xspace.task_events(str(path), space_of.planes, task)]
    monkeypatch.undo()
    return [(e.name, e.pid, e.tid, e.ts, e.dur, bytes(e.args)) for e in events]


def _python_line(body: bytes) -> list:
    """The events of a line's bytes as the Python reader gives them, each stat's bytes cut from its range."""
    return [(k, o, d, [body[a:b] for a, b in s]) for k, o, d, s in xspace._line_events(body, (0, len(body)))]


def _every_stat_kind() -> bytes:
    """A host line whose events carry a stat of every value type: doubles, unsigned and signed integers (the
    largest and the most negative), text (with bytes that are no UTF-8), bytes, references, none; a stat naming
    itself after its value; a stat holding two values (the last one counts); and fields of no stat's schema."""
    stats = [
        stat(1, 2.5), stat(1, 1e-300), stat(2, -(1 << 63)), stat(2, 7),
        number(1, 2) + number(3, (1 << 64) - 1),  # a uint64 past int64
        stat(3, "grid 1,1,1"), number(1, 3) + message(5, b"\xff\xfe text"), stat(3, b"\x00\x01"),
        stat(1, 7, ref=True), number(1, 1),  # a reference; no value
        number(4, -5) + number(1, 2),  # the name after the value
        stat(1, 3.0) + number(3, 9),  # two values: the last
        stat(2, 4) + number(9, 1) + message(12, b"later field"),  # fields the schema of a stat has not
    ]  # fmt: skip
    events = [event(1, 1000 * k, 500, s, stat(4, k)) for k, s in enumerate(stats)]
    events.append(event(1, -1, 0))  # a negative offset (ten bytes) and a zero duration
    host = plane(1, "/host:CPU", lines=[line(1, "python", 5, *events)], event_names={1: "PjitFunction(step)"},
                 stat_names=NAMES)  # fmt: skip
    return space(host)


@pytest.mark.parametrize("source", ["real", "gpu capture", "every stat kind"])
def test_the_compiled_readers_give_every_event_the_python_reader_gives(tmp_path, monkeypatch, source):
    """The real capture's XSpace, a generated GPU step's, and stats of every kind: the same events, names, times and
    args, with the compiled readers as without them."""
    path = XSPACE if source == "real" else tmp_path / "host.xplane.pb"
    if source != "real":
        path.write_bytes(gpu_capture(8) if source == "gpu capture" else _every_stat_kind())
    compiled, python = _events(path, monkeypatch, True), _events(path, monkeypatch, False)
    assert compiled == python and len(python) > 10
    if source == "every stat kind":
        args = [a for *_, a in python]
        assert b'"name":"2.5"' in args[0] and b'"correlation_id":"-9223372036854775808"' in args[2]
        assert b'"correlation_id":"18446744073709551615"' in args[4]
        assert '"kernel_details":"\ufffd\ufffd text"'.encode() in args[6]
        assert b'"name":"ref target"' in args[8] and b'"name":"3"' not in args[11]


def test_a_line_is_read_as_the_python_reader_reads_it():
    """A line's events one by one: metadata id, offset and duration as int64s, each stat's bytes; fields of the
    line other than events passed over."""
    body = number(1, 16) + message(2, "Stream #16") + message(4, event(3, 10, 20, stat(2, 5))) + number(3, 99)
    body += message(4, event(4, -1, 0)) + message(11, "display")
    expected = [(3, 10, 20, [stat(2, 5)]), (4, -1, 0, [])]
    assert xspace._compiled_line_events(body, 0, len(body)) == expected
    assert _python_line(body) == expected
    assert xspace._compiled_line_events(body, 0, 0) == []


@pytest.mark.parametrize(
    "body",
    [
        b"\x22\x05\x08",  # an event whose length runs past the line
        message(4, number(1, 1) + b"\x10\xff"),  # a number that runs past its event
        message(4, number(1, 1) + b"\x22\x07\x08"),  # a stat that runs past its event
        message(4, b"\x08\x01\x33"),  # wire type 3 (a group)
        message(4, b"\x08\x01\x00\x01"),  # a field numbered 0
        b"\x00\x01",  # a line's field numbered 0
        b"\x1a" + varint(1 << 40),  # a line's field longer than the line
    ],
    ids=["event past line", "number past event", "stat past event", "group", "field 0", "line field 0", "long field"],
)
def test_malformed_bytes_are_left_to_the_python_reader(body):
    """Bytes that break the schema are not read by the compiled reader (None): the Python reader names where they
    break off (or runs off the bytes' end, which the file's reader says is where it was cut short)."""
    assert xspace._compiled_line_events(body, 0, len(body)) is None
    with pytest.raises((xspace.MalformedProtobuf, IndexError)):
        list(xspace._line_events(body, (0, len(body))))


@pytest.mark.parametrize("digits", [b"\xff" * 10 + b"\x01", b"\xff" * 9 + b"\x02"], ids=["eleven bytes", "65 bits"])
def test_a_number_past_64_bits_is_left_to_the_python_reader(digits):
    """An event's number of more than 64 bits is no int64 the compiled reader could give: it reads none of the line,
    and the Python reader reads it as it always has."""
    body = message(4, b"\x08" + digits)
    assert xspace._compiled_line_events(body, 0, len(body)) is None
    assert len(list(xspace._line_events(body, (0, len(body))))) == 1


def test_a_range_outside_the_data_is_refused():
    with pytest.raises(ValueError, match="outside the data"):
        xspace._compiled_line_events(b"\x08\x01", 0, 3)


@pytest.mark.parametrize(
    ("encoded", "read"),
    [
        (stat(1, 2.5), (1, 2, 2.5)),
        (number(1, 2) + number(3, (1 << 64) - 1), (2, 3, (1 << 64) - 1)),
        (stat(2, -3), (2, 4, -3)),
        (stat(3, "text"), (3, 5, b"text")),
        (stat(3, b"\x00"), (3, 6, None)),
        (stat(1, 7, ref=True), (1, 7, 7)),
        (number(1, 4), (4, 0, None)),
        (number(4, 8) + number(1, 2), (2, 4, 8)),
        (stat(1, "a") + number(3, 6), (1, 3, 6)),
        (number(1, (1 << 64) - 2), (-2, 0, None)),
    ],
    ids=["double", "uint64", "int64", "text", "bytes", "reference", "no value", "name last", "last value", "id < 0"],
)
def test_a_stat_is_read_to_its_id_field_and_value(encoded, read):
    assert xspace._compiled_stat_value(encoded) == read


@pytest.mark.parametrize(
    "encoded",
    [
        message(1, b"x"),  # the id as bytes
        number(2, 5),  # a double as a varint
        varint(2 << 3 | 1) + struct.pack("<d", 1.0)[:4],  # a double cut short
        number(5, 1),  # text as a varint
        number(1, 1) + b"\x3a\x05ab",  # a reference's bytes past the end
        b"\x08" + b"\xff" * 10,  # an id of more than 64 bits
    ],
    ids=["id as bytes", "double as varint", "short double", "text as varint", "past the end", "long id"],
)
def test_a_stat_off_its_schema_is_left_to_the_python_reader(encoded):
    assert xspace._compiled_stat_value(encoded) is None


@functools.cache
def _real_lines() -> list[bytes]:
    """The real capture's lines, each as its bytes: the seeds the mutations below start from."""
    data = XSPACE.read_bytes()
    space_of = xspace.layout(str(XSPACE), {})
    return [data[begin:end] for task in space_of.tasks for _, (begin, end) in task.runs][:40]


@pytest.mark.fuzz
@given(
    st.data(),
    st.lists(st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate"]), st.floats(0, 1),
                       st.integers(0, 255), st.just(b"")), min_size=1, max_size=4),
)  # fmt: skip
def test_mutated_real_lines_read_as_the_python_reader_reads_them_or_are_left_to_it(data, mutations):
    """Byte flips, insertions, deletions and truncations of the real capture's lines: the compiled reader never
    reads past the line (it would crash the process), and where it reads one, it gives the Python reader's events;
    where the Python reader finds the bytes malformed, the compiled one reads nothing."""
    line_bytes = mutated(data.draw(st.sampled_from(_real_lines())), mutations)
    fast = xspace._compiled_line_events(line_bytes, 0, len(line_bytes))
    try:
        slow = _python_line(line_bytes)
    except (xspace.MalformedProtobuf, IndexError):
        assert fast is None
        return
    if fast is not None:
        assert fast == slow
        for _, _, _, stats in fast:
            for encoded in stats:
                if (read := xspace._compiled_stat_value(encoded)) is not None:
                    assert xspace._event_stat(encoded, NAMES) == xspace._stat(encoded, (0, len(encoded)), NAMES)
                    assert read[1] in (0, 2, 3, 4, 5, 6, 7)
