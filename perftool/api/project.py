"""A project's settings: ``perftool.yaml``, or ``[tool.perftool]`` in ``pyproject.toml``.

They configure the rules (:class:`~perftool.rules.settings.RuleSettings`) and the gate
(:class:`~perftool.gate.policy.GatePolicy`), and sit above both in the pipeline.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationError

from perftool.common.choices import FailOn
from perftool.common.errors import PerftoolError
from perftool.common.limits import MAX_JSON_DEPTH
from perftool.common.paths import kind_of
from perftool.common.yamlfile import read_document, read_model, validation_error
from perftool.gate.policy import GatePolicy
from perftool.rules.settings import RuleSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ProjectConfig(RuleSettings):
    """The rules' settings, and what the commands default to and gate holds a candidate to."""

    fail_on: FailOn | None = None
    device: Literal["npu", "ipu", "hpu", "gpu", "generic"] | None = None
    evidence: int | None = Field(None, ge=0, le=100, description="occurrences listed per finding")
    gate: GatePolicy = Field(default_factory=GatePolicy, description="what perftool gate holds a candidate to")
    scheduler: str | None = Field(
        None, description="Dask scheduler address (tcp://host:8786) that analyses a job's ranks and runs tune sweeps"
    )
    workers: int | None = Field(None, ge=1, le=4096, description="local Dask worker processes when no scheduler")
    _file: str | None = PrivateAttr(None)

    @property
    def file(self) -> str | None:
        """The file the settings were read from; None for the defaults."""
        return self._file


REPOSITORY_MARKERS = (".git", ".hg")  # the search for a project config ends at a repository's root


def load_project(explicit: str | None = None, directory: Path | None = None) -> ProjectConfig | None:
    """``explicit`` (a perftool.yaml or pyproject.toml), else the nearest found from ``directory`` (the working
    directory) upward to its repository's root, as ruff and pytest look: in each folder ``perftool.yaml``, then a
    ``pyproject.toml`` with a ``[tool.perftool]`` table."""
    if explicit is not None:
        path = Path(explicit)
        if kind_of(path, "project config") != "file":
            raise PerftoolError(f"{explicit}: project config does not exist")
        return _from_toml(path) if path.suffix == ".toml" else _from_yaml(path)
    start = (directory or Path.cwd()).absolute()
    for folder in (start, *start.parents):
        if (folder / "perftool.yaml").is_file():
            return _from_yaml(folder / "perftool.yaml")
        if (folder / "pyproject.toml").is_file() and (found := _from_toml(folder / "pyproject.toml")) is not None:
            return found
        if any((folder / marker).exists() for marker in REPOSITORY_MARKERS):
            return None
    return None


def _from_yaml(path: Path) -> ProjectConfig:
    config, _ = read_model(
        path, "project config", ProjectConfig, "a project config must be a YAML mapping", empty_is_mapping=True
    )
    return _rooted(config, path, str(path))


def _from_toml(path: Path) -> ProjectConfig | None:
    try:
        document = tomllib.loads(read_document(path, "project config").decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PerftoolError(f"{path}: cannot read: {exc}") from None
    except RecursionError:
        raise PerftoolError(f"{path}: TOML nested too deeply (over {MAX_JSON_DEPTH} levels)") from None
    tool = document.get("tool")
    section = tool.get("perftool") if isinstance(tool, dict) else None
    if section is None:
        return None
    source = f"{path} [tool.perftool]"
    try:
        config = ProjectConfig.model_validate(section)
    except ValidationError as exc:
        raise validation_error(source, None, exc) from None
    return _rooted(config, path, source)


def _rooted(config: ProjectConfig, path: Path, source: str) -> ProjectConfig:
    """Rule directories are relative to the config file's own directory."""
    rooted = config.model_copy(update={"rule_dirs": [str(path.parent / d) for d in config.rule_dirs]})
    rooted._source = source
    rooted._file = str(path)
    return rooted
