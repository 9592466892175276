"""JSON conformance of the two decoding paths: a corpus in the manner of JSONTestSuite (``y_`` texts every parser
must accept, ``n_`` texts it must refuse, ``i_`` texts the standard leaves to the parser), each placed where a trace
holds values (an event's args, its time, its name, a field perftool does not read). The compiled scanner and msgspec
must agree: where msgspec refuses a piece the scanner declines it (and msgspec then names the error), and where the
scanner reads one its Part is msgspec's, value for value. Text that is not JSON is refused wherever it stands, but
for bytes that are not UTF-8 inside a value perftool keeps as written (args) or skips (a field it does not read):
both paths take those spans as bytes, unchecked, and whatever later decodes kept args says so then; and for a bare
NaN or infinity there, which writers emit all the same: the scanner declines it, and msgspec's path reads it as
null."""

from __future__ import annotations

import msgspec
import pytest
from test_scanner import KEEP, by_msgspec, same_part

from perftool.trace import decode, events
from perftool.trace.parts import make_part

pytestmark = pytest.mark.skipif(not events.COMPILED, reason="the scanner was not compiled (no C compiler at install)")

ACCEPTED = {  # y_: valid JSON
    "y_array_empty": b"[]",
    "y_object_empty": b"{}",
    "y_array_nested": b"[[[[[]]]]]",
    "y_object_literals": b'{"a":[true,false,null]}',
    "y_whitespace_all_four": b" \t\r\n[ 1 ,\t2 ]\r\n ",
    "y_number_zero": b"0",
    "y_number_minus_zero": b"-0",
    "y_number_fraction": b"0.5",
    "y_number_exponent": b"1E22",
    "y_number_negative_exponent": b"1e-2",
    "y_number_signed_exponent": b"-1.5e+3",
    "y_number_int_2_53": b"9007199254740993",
    "y_string_empty": b'""',
    "y_string_escapes": b'"\\"\\\\\\/\\b\\f\\n\\r\\t"',
    "y_string_unicode_escape": b'"\\u00e9\\u4e2d"',
    "y_string_surrogate_pair": b'"\\ud83d\\ude00"',
    "y_string_escaped_nul": b'"\\u0000"',
    "y_string_raw_utf8": '"é中🚀"'.encode(),
    "y_string_raw_del": b'"\x7f"',
    "y_string_line_separator": '"a\u2028b"'.encode(),
}
REFUSED = {  # n_: not JSON
    "n_array_trailing_comma": b"[1,]",
    "n_object_trailing_comma": b'{"a":1,}',
    "n_array_double_comma": b"[1,,2]",
    "n_array_leading_comma": b"[,1]",
    "n_array_unclosed": b"[[1]",
    "n_array_extra_close": b"[1]]",
    "n_array_missing_comma": b"[1 2]",
    "n_object_missing_colon": b'{"a" 1}',
    "n_object_unquoted_key": b"{a:1}",
    "n_object_single_quotes": b"{'a':1}",
    "n_object_unclosed": b'{"a":1',
    "n_number_leading_zero": b"01",
    "n_number_minus_leading_zero": b"-01",
    "n_number_leading_dot": b".5",
    "n_number_trailing_dot": b"1.",
    "n_number_plus": b"+1",
    "n_number_bare_exponent": b"1e",
    "n_number_signed_bare_exponent": b"1e+",
    "n_number_fraction_exponent": b"1e1.5",
    "n_number_minus_alone": b"-",
    "n_number_hex": b"0x10",
    "n_literal_truncated": b"tru",
    "n_literal_capitalised": b"True",
    "n_literal_null_truncated": b"nul",
    "n_string_raw_nul": b'"\x00"',
    "n_string_raw_tab": b'"\t"',
    "n_string_raw_newline": b'"a\nb"',
    "n_string_hex_escape": b'"\\x41"',
    "n_string_short_unicode_escape": b'"\\u12"',
    "n_string_bad_unicode_escape": b'"\\uZZZZ"',
    "n_string_unknown_escape": b'"\\a"',
    "n_string_unclosed": b'"a',
    "n_string_escaped_close": b'"a\\"',
    "n_string_invalid_utf8": b'"\xff"',
    "n_string_overlong_utf8": b'"\xc0\xaf"',
    "n_string_truncated_utf8": b'"\xe4\xb8"',
    "n_string_encoded_surrogate": b'"\xed\xa0\x80"',
    "n_whitespace_form_feed": b"[\x0c1]",
    "n_whitespace_nbsp": b"[\xc2\xa01]",
    "n_structure_comment": b"[1/*x*/]",
}
# n_ texts that writers emit all the same (Python's json module; C and C++ formatting a double): a value that says
# nothing, read as null where perftool keeps or skips the value (args, a field it does not read), refused where it must
# be a time or a name
REPAIRED = {
    "n_number_nan": b"NaN",
    "n_number_infinity": b"Infinity",
    "n_number_minus_infinity": b"-Infinity",
    "n_number_c_nan": b"-nan",
    "n_number_c_infinity": b"inf",
}
UNDECIDED = {  # i_: the standard leaves these to the parser; both paths must still give one answer
    "i_string_lone_high_surrogate": b'"\\ud800"',
    "i_string_lone_low_surrogate": b'"\\udc00"',
    "i_string_inverted_surrogates": b'"\\udc00\\ud800"',
    "i_number_overflow": b"1e400",
    "i_number_negative_overflow": b"-1e400",
    "i_number_underflow": b"1e-400",
    "i_number_huge_int": b"123456789012345678901234567890",
    "i_number_huge_negative_int": b"-123456789012345678901234567890",
    "i_string_beyond_unicode": b'"\xf4\x90\x80\x80"',
    "i_structure_deep_nesting": b"[" * 500 + b"]" * 500,
}
CORPUS = ACCEPTED | REFUSED | REPAIRED | UNDECIDED
NOT_UTF8 = {"n_string_invalid_utf8", "n_string_overlong_utf8", "n_string_truncated_utf8", "n_string_encoded_surrogate"}
RAW = ("args", "unread field")  # places whose values both paths keep or skip as bytes
LEFT_TO_MSGSPEC = {"y_string_surrogate_pair"}  # a surrogate escape: the scanner leaves the piece to msgspec
PLACES = {  # where a trace holds a value, as a piece of one event
    "args": b'{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"v":%s}}',
    "ts": b'{"ph":"X","name":"n","pid":1,"tid":1,"ts":%s,"dur":1}',
    "name": b'{"ph":"X","name":%s,"pid":1,"tid":1,"ts":1,"dur":1}',
    "unread field": b'{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"zz":%s}',
}


def _msgspec_accepts(text: bytes) -> bool:
    try:
        msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


def test_the_corpus_is_what_its_names_say():
    """msgspec, the reference path, accepts every y_ text and refuses every n_ one (so a case means what it says)."""
    assert [name for name, text in ACCEPTED.items() if not _msgspec_accepts(text)] == []
    assert [name for name, text in (REFUSED | REPAIRED).items() if _msgspec_accepts(text)] == []


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", CORPUS)
def test_each_text_reads_the_same_whichever_path_reads_it(name, place):
    piece = PLACES[place] % CORPUS[name]
    try:
        expected = make_part(by_msgspec(piece), KEEP)
    except (decode.NeedsExactPath, events.PieceError, RecursionError):
        expected = None
    fast = events.scan_piece(piece)
    if name in REPAIRED:
        assert fast is None, "the scanner read a text that is not JSON"
        assert (expected is not None) == (place in RAW), "a bare NaN or infinity not read as null where it says nothing"
    elif name.startswith("n_") and not (name in NOT_UTF8 and place in RAW):
        assert expected is None and fast is None, "a text that is not JSON was read"
    if fast is None:
        return
    assert expected is not None, "the scanner read a piece msgspec refuses"
    same_part(make_part(fast, KEEP), expected)


def test_the_scanner_reads_valid_json_itself_wherever_a_trace_holds_a_value():
    """The corpus's y_ texts in args and in fields perftool does not read are the scanner's to read, not msgspec's
    (but for the surrogate escapes it leaves to msgspec): the fast path is not the path of a few easy events only."""
    declined = [
        (name, place)
        for name, text in ACCEPTED.items()
        for place in RAW
        if name not in LEFT_TO_MSGSPEC and events.scan_piece(PLACES[place] % text) is None
    ]
    assert declined == []
