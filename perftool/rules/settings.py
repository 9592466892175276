"""What a project sets for its rules: which run, and what it changes in them without editing their files.

The project config as a whole (``perftool.yaml``, ``[tool.perftool]``) is :mod:`perftool.api.project`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from perftool.rules.model import Severity


class RuleChange(BaseModel):
    """What a project changes in one rule, without touching its file."""

    model_config = ConfigDict(extra="forbid")

    thresholds: dict[Literal["info", "warning", "error"], float | None] = Field(default_factory=dict)
    params: dict[str, float] = Field(default_factory=dict)
    severity: Severity | None = None
    enabled: bool | None = None


class RuleSettings(BaseModel):
    """Which rules run and what a project changes in them (the rules' part of a project config)."""

    model_config = ConfigDict(extra="forbid")

    rule_dirs: list[str] = Field(default_factory=list, description="extra rule directories, relative to this file")
    select: list[str] = Field(default_factory=list, description="run only these rules (ids or names)")
    ignore: list[str] = Field(default_factory=list, description="never run these rules")
    rules: dict[str, RuleChange] = Field(default_factory=dict, description="per rule id or name: what to change")
    _source: str = PrivateAttr("project config")

    @property
    def source(self) -> str:
        """Where the settings came from, for error messages."""
        return self._source
