"""``--format json`` of a command whose result is its model: ``gate``, ``metrics``, ``knobs``, ``rules list`` (their
published documents) and ``rules explain`` (the rule as its file's model, ``perftool schema rule``)."""

from __future__ import annotations

from pydantic import BaseModel


def render(model: BaseModel) -> str:
    return model.model_dump_json(by_alias=True, indent=2) + "\n"
