"""Event names as people read them in a table: a demangled C++ kernel signature on one line.

Real kernels are named by their whole signature: return type, namespaces, nested template arguments and
parameter list, often hundreds of characters. :func:`readable` keeps what tells kernels apart — the
function and its first level of template arguments — and elides the rest; tables cut what is still too
long once, at their width, and JSON keeps the full name. A leaf module: reports, rules and diff all read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

NAME_IN_TABLE = 160  # characters of a name a report's table shows (HTML gives the whole name on hover, JSON keeps it)
_RETURN_TYPE = re.compile(r"^(void|int|float)\s+")
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::")
_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")  # at::native::Foo → Foo
_SPACES = re.compile(r"\s+")
_CLOSING = re.compile(r">\s+>")  # C++98's "> >"
# Kineto's "dir/file.py(40): main" (on Windows, backslashes between the folders)
_PYTHON_FRAME = re.compile(r"^(?:[^()]*[/\\])?([^/\\()]+\.py)\((\d+)\): (\S.*)$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")  # "<built-in method astype of numpy.ndarray object at 0x7f…>"
_DEVICE_KINDS = "GPU|NPU|HPU|IPU|TPU|XPU|MTIA"  # how profilers label a device by its kind
_DEVICE_INSTANCE = re.compile(rf"\b({_DEVICE_KINDS}|device|pid) ?\d+\b")  # "GPU 3": which device, not which kind
# a device named by where its work ran, once or counted ("2 × GPU 0"): its kind, an XLA plane, a numbered process
_PLACE = re.compile(rf"^(?:\d+ × )?(?:(?:{_DEVICE_KINDS})(?: \d+)?|/device:[A-Z]+:\d+|(?:device|pid) \d+)$")
# A call of a compiled function from Python (JAX's jit and pmap): what the user's loop calls, step by step or op by op;
# the parentheses hold the function's name (``PjitFunction(train_step)``), no parameter list.
_COMPILED_FUNCTIONS = ("PjitFunction", "PmapFunction")
COMPILED_CALL = re.compile(rf"^({'|'.join(_COMPILED_FUNCTIONS)})\(")


def readable(name: str, width: int | None = None) -> str:
    """``name`` as a table shows it: a C++ signature without its return type, namespaces, parameter list and
    template arguments nested below the first level (``<…>``); any name cut once with "…" where longer than
    ``width``. Op names (``aten::addmm``), plain kernel names and JAX's compiled calls (``PjitFunction(train_step)``)
    keep every character; a Python frame reads ``main (train.py:40)``, an object without its address."""
    short = _SPACES.sub(" ", name.strip())
    python = host_call(short)
    if python != short or (short.startswith("<") and short.endswith(">")):  # ``<built-in …>`` is no template
        short = python
    else:
        bare = without_parameters(short)
        # a signature less its return type: all before the name where it had parameters, else a plain type
        bare = _without_return_type(bare) if bare != short else _RETURN_TYPE.sub("", bare)
        if "<" in bare or bare != short:  # a signature: template arguments, a parameter list or a return type
            short = _CLOSING.sub(">>", _NAMESPACES.sub("", _ANONYMOUS.sub("", _nested_elided(bare))))
    return short if width is None or len(short) <= width else short[: width - 1].rstrip() + "…"


def shortened(name: str) -> str:
    """``name`` as a report's sentence or table shows it: :func:`readable`, cut at :data:`NAME_IN_TABLE`."""
    return readable(name, NAME_IN_TABLE)


def host_call(name: str) -> str:
    """A host call as a person reads it: a Kineto Python frame as ``main (train.py:40)``, a Python object without
    the address it had in one run (``… object at 0x7f3a…>`` → ``… object>``); any other name as it is."""
    frame = _PYTHON_FRAME.match(name)
    if frame:
        return f"{frame.group(3)} ({frame.group(1)}:{frame.group(2)})"
    return _ADDRESS.sub(">", name)


def without_parameters(name: str) -> str:
    """``f<T>(float*, int)`` → ``f<T>``: a C++ signature's parameter list, the ``(`` right after the name or its
    template arguments (``Memcpy HtoD (Pageable -> Device)`` keeps its words; a JAX compiled call's parentheses name
    the function it calls: ``PjitFunction(train_step)`` stays whole). A ``<`` or ``>`` in brackets within template
    arguments is an operator, not one of theirs (``enable_if<((8)>(0)), void>``)."""
    for position in _outermost(name, "("):
        if name.endswith(_COMPILED_FUNCTIONS, 0, position):  # "idle while host runs PjitFunction(add)" too
            continue
        if position > 0 and (name[position - 1].isalnum() or name[position - 1] in "_>"):
            return name[:position].rstrip() if name.endswith(")") else name
    return name


def _without_return_type(signature: str) -> str:
    """``std::enable_if<…>::type ns::f<T>`` → ``ns::f<T>``: a signature (its parameters dropped) less its return
    type, the one word before its name outside template arguments and brackets; words that are no type (a
    sentence around a call, ``idle while host runs f``) are kept."""
    spaces = list(_outermost(signature, " "))
    return signature[spaces[0] + 1 :] if len(spaces) == 1 else signature


def _outermost(name: str, wanted: str) -> Iterator[int]:
    """The positions of ``wanted`` (one character) outside template arguments and outside brackets; brackets are
    counted everywhere, angle brackets only outside brackets."""
    angles = brackets = 0
    for position, char in enumerate(name):
        if char == wanted and angles == 0 and brackets == 0:
            yield position
        if char == "(":
            brackets += 1
        elif char == ")":
            brackets = max(brackets - 1, 0)
        elif brackets == 0 and char in "<>":
            angles = max(angles + (1 if char == "<" else -1), 0)


def _nested_elided(name: str) -> str:
    """``f<A<B>, C>`` → ``f<A<…>, C>``: template arguments two or more levels deep as ``<…>``."""
    kept, depth = [], 0
    for char in name:
        if char == "<":
            depth += 1
            if depth == 2:
                kept.append("<…")
            elif depth < 2:
                kept.append(char)
        elif char == ">":
            depth = max(depth - 1, 0)
            if depth < 2:
                kept.append(">")
        elif depth < 2:
            kept.append(char)
    return "".join(kept)


def device_model(name: str) -> str:
    """A device's name without which one of its kind it is: ``GPU 3`` is ``GPU``, ``NVIDIA A100`` stays."""
    return _DEVICE_INSTANCE.sub(r"\1", name)


def names_only_a_place(device: str) -> bool:
    """Whether a device's name (as a report gives it, several joined by ", ") says only where its work ran, no model:
    Kineto's process label "GPU 0", torch_npu's text export's "NPU", an XLA plane "/device:GPU:0", a process
    numbered "device 3". Another capture of the same device may name its model."""
    return all(_PLACE.match(part) for part in device.split(", "))


def as_device(name: str) -> str:
    """``device NVIDIA A100``: a device's name after the word, never twice where the name has it (``device 0``)."""
    return name if name.lower().startswith("device") else f"device {name}"
