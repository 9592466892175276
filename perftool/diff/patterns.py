"""Which regular expressions of a user's op map are refused: those whose matching time can grow exponentially with
a name's length in Python's backtracking engine (``^(a+)+$`` on 40 letters takes hours).

The check reads the parsed pattern: a repeat of varying count inside another repeat, an alternation inside a
repeat, and a reference back to a group are refused. What remains backtracks at most polynomially, and is matched
against a name's first :data:`perftool.diff.names.MATCHED_CHARS` characters only. Atomic groups and possessive
repeats never backtrack into what they matched, so they are allowed anywhere.
"""

from __future__ import annotations

from typing import Any

try:
    from re import _parser as _sre  # type: ignore[attr-defined]  # Python 3.11 and later
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre


def backtracking_risk(pattern: str) -> str | None:
    """Why ``pattern`` (a valid regular expression) may backtrack exponentially, or None when it cannot."""
    return _risk(_sre.parse(pattern), repeated=False)


def _risk(items: Any, repeated: bool) -> str | None:
    """The first construct in ``items`` (a parsed pattern) that backtracks exponentially; ``repeated``: whether
    ``items`` sits inside a repeat of more than one."""
    for op, argument in items:
        kind = str(op)
        found: str | None = None
        if kind in ("GROUPREF", "GROUPREF_EXISTS"):
            return "a reference back to a group"
        if kind in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, body = argument
            if repeated and high != low:
                return "a repeat inside a repeat (such as (a+)+)"
            found = _risk(body, repeated or high > 1)
        elif kind == "BRANCH":
            if repeated:
                return "an alternation inside a repeat (such as (a|ab)*)"
            found = next((risk for branch in argument[1] if (risk := _risk(branch, repeated))), None)
        elif kind == "SUBPATTERN":
            found = _risk(argument[-1], repeated)
        elif kind in ("ASSERT", "ASSERT_NOT"):
            found = _risk(argument[1], repeated)
        if found:
            return found
    return None
