"""``perftool tune --write-best FILE``: the best configuration as an emulator config ``perftool emulate`` runs."""

from __future__ import annotations

import yaml

from perftool.emulator.config import setting
from perftool.tune.result import TuneResult


def render(result: TuneResult, source: str) -> str:
    changed = {
        name: value for name, value in result.knobs(result.best).items() if setting(result.config, name) != value
    }
    if not changed:
        gain = "the config as written is already the best"
    elif result.baseline.simulated[0]:
        gain = f"x{result.speedup():.2f} {result.objective} over the config as written"
    else:
        gain = f"the config as written cannot run ({result.baseline.reason[0]})"
    header = (
        f"# Best configuration found by `perftool tune {source}` ({result.strategy}, seed {result.config.tune.seed}):\n"
        f"# {gain}. Changed: {', '.join(f'{k}={v}' for k, v in changed.items()) or 'nothing'}.\n"
        f"# Run it: perftool emulate <this file>\n"
    )
    document = result.best_config().model_dump(mode="json")
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
