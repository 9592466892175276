"""Reading YAML files safely and pointing errors at the line a field came from.

Every YAML file perftool reads (emulator configs, rule files, project configs) goes through
:func:`read_yaml`, which only ever uses the safe loader, and reports validation problems through
:func:`field_error` as ``FILE:LINE: field.path: reason``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from perftool.common import limits
from perftool.common.errors import PerftoolError, one_line, parameter

Model = TypeVar("Model", bound=BaseModel)
# libyaml's safe loader where PyYAML was built with it (8x faster on the bundled device and rule files), the same
# node tree and the same safe constructors either way
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_document(path: str | Path, what: str) -> bytes:
    """The bytes of a config-sized file (a config, rule, budget or saved result); ``what`` names its kind."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limits.MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise PerftoolError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limits.MAX_DOCUMENT_BYTES:
        raise PerftoolError(f"{path}: a {what} larger than {limits.size_text(limits.MAX_DOCUMENT_BYTES)} is refused")
    return data


def read_yaml(path: str | Path, what: str) -> tuple[Any, yaml.Node | None]:
    """The document in ``path`` and its node tree (for line numbers); ``what`` names the file's kind."""
    try:
        text = read_document(path, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PerftoolError(f"{path}: cannot read {what}: not UTF-8 (byte {exc.start})") from None
    return parse_yaml(text, str(path))


def read_model(
    path: str | Path, what: str, model: type[Model], not_mapping: str, empty_is_mapping: bool = False
) -> tuple[Model, yaml.Node | None]:
    """The mapping in ``path`` validated as ``model``, and its node tree (for errors found later). A document that
    is no mapping is refused with ``not_mapping``; an empty one counts as an empty mapping if ``empty_is_mapping``."""
    document, root = read_yaml(path, what)
    if document is None and empty_is_mapping:
        document = {}
    if not isinstance(document, dict):
        raise PerftoolError(f"{path}: {not_mapping}")
    try:
        return model.model_validate(document), root
    except ValidationError as exc:
        raise validation_error(str(path), root, exc) from None


def parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """Parse with the safe loader only (tags such as ``!!python/object`` are errors, never code), refusing
    documents nested too deeply, whose aliases expand beyond :data:`perftool.common.limits.MAX_YAML_VALUES`, that
    repeat a key in one mapping (YAML forbids it; PyYAML would keep the last silently), or that hold
    control characters."""
    try:
        loader = _SAFE_LOADER(text)
    except yaml.reader.ReaderError as exc:  # checked when the text is read in: a character YAML does not allow
        raise _not_allowed(exc, text, source) from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _check_expansion(root, source)
        return loader.construct_document(root), root
    except yaml.reader.ReaderError as exc:  # the same, found later (libyaml reads as it parses)
        raise _not_allowed(exc, text, source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PerftoolError(f"{source}{where}: not valid YAML: {reason}") from None
    except RecursionError:
        raise PerftoolError(f"{source}: YAML nested too deeply (over {limits.MAX_JSON_DEPTH} levels)") from None
    finally:
        loader.dispose()


def _not_allowed(exc: yaml.reader.ReaderError, text: str, source: str) -> PerftoolError:
    line = text.count("\n", 0, exc.position) + 1
    column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
    return PerftoolError(
        f"{source}:{line}:{column}: not valid YAML: control character U+{exc.character:04X} is not allowed"
    )


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse recursive aliases and documents whose aliases expand to too many values ('billion laughs')."""
    values: dict[int, int] = {}  # node id -> values it expands to
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in values:
            continue
        children = _children(node)
        if children_done:
            visiting.discard(id(node))
            values[id(node)] = 1 + sum(values[id(child)] for child in children)
            if values[id(node)] > limits.MAX_YAML_VALUES:
                line = node.start_mark.line + 1
                raise PerftoolError(
                    f"{source}:{line}: aliases expand to more than {limits.MAX_YAML_VALUES:,} values; refused"
                )
            continue
        _check_unique_keys(node, source)
        visiting.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in visiting:  # a child that is its own ancestor: the only way to a cycle
                line = child.start_mark.line + 1
                raise PerftoolError(f"{source}:{line}: a recursive alias (a value that contains itself)")
            stack.append((child, False))


def _check_unique_keys(node: yaml.Node, source: str) -> None:
    """Refuse a mapping that gives one key twice, naming the key and both lines."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":  # merge keys may repeat
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise PerftoolError(
                one_line(f"{source}:{line}: key '{key.value}' is given twice (lines {seen[key.value]} and {line})")
            )
        seen[key.value] = line


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def validation_error(
    source: str, root: yaml.Node | None, exc: ValidationError, prefix: tuple = (), overridden: dict | None = None
) -> PerftoolError:
    """The first problem pydantic found, as one line naming the file, line and field."""
    error = exc.errors()[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return field_error(source, root, (*prefix, *error["loc"]), error_reason(error) + more, overridden)


def field_error(
    source: str, root: yaml.Node | None, loc: tuple, reason: str, overridden: dict[tuple, str] | None = None
) -> PerftoolError:
    """``FILE:LINE: field.path: reason``, or ``FILE (--set k=v)`` when an override set the field."""
    shown = [part for part in loc if part != "[key]"]  # pydantic's marker for a bad mapping key
    field_path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in shown).lstrip(".")
    override = next((item for path, item in (overridden or {}).items() if tuple(loc[: len(path)]) == path), None)
    line = None if override else line_of(root, loc)
    where = f"{source} ({parameter('overrides')} {override})" if override else f"{source}:{line}" if line else source
    return PerftoolError(one_line(f"{where}: {field_path or 'document'}: {reason}"))


def line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """The 1-based line of the deepest node on ``loc`` that the YAML document has."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def error_reason(error: Mapping[str, Any]) -> str:
    """One pydantic error as a short phrase, with the value that caused it."""
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"].startswith("byte_size"):
        return f"not a size (got {error.get('input')!r}): give bytes or a unit, e.g. 220MB or 1.5GiB"
    if error["type"] == "value_error":  # our own validators: the message already names the value
        return error["msg"].removeprefix("Value error, ")
    value = error.get("input")
    shown = f" (got {value!r})" if isinstance(value, (int, float, str, bool)) and error["type"] != "missing" else ""
    return f"{error['msg']}{shown}"
