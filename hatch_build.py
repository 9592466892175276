"""Build hook: compiles perftool's trace scanner (``perftool/trace/_scan.c``), and where it builds the module that
keeps numpy's arrays in files for traces larger than memory (``perftool/trace/_filemem.c``, Linux), with the C
compiler Python was built with, next to their sources, for wheels and editable installs alike.

The scanner only makes loading faster: where no compiler is found, or compiling fails, the hook says so and the
wheel is pure Python, reading every trace with msgspec (``perftool.trace.events``). ``PERFTOOL_PURE_PYTHON=1`` asks
for that wheel: one that installs on any platform and Python (as a CI job's committed wheel must), where a wheel
with the scanner installs only where it was built.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SCANNER = os.path.join("perftool", "trace", "_scan.c")
FILE_ARRAYS = os.path.join("perftool", "trace", "_filemem.c")  # numpy's arrays in files (Linux): perftool.trace.store
PURE_PYTHON_ENV = "PERFTOOL_PURE_PYTHON"


class ScannerBuild(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
            print(
                f"perftool: {PURE_PYTHON_ENV} is set: {SCANNER} not built, traces are read with msgspec",
                file=sys.stderr,
            )
            return
        linker = sysconfig.get_config_var("LDSHARED")
        if not linker:
            print(f"perftool: no C compiler configured for this Python: {SCANNER} not built", file=sys.stderr)
            return
        built = [self._compile(SCANNER, linker, "traces are read with msgspec")]
        if built[0] is None:
            return
        built.append(self._compile(FILE_ARRAYS, linker, "a trace's columns on disk leave its analysis in memory"))
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install imports them from where they were built
            for target in filter(None, built):
                build_data["force_include"][target] = os.path.relpath(target, self.root)

    def _compile(self, relative: str, linker: str, without: str) -> str | None:
        """The extension module built from the C file ``relative``, next to it; None where it could not be built
        (``without`` says what that means)."""
        source = os.path.join(self.root, relative)
        target = source[: -len(".c")] + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
        command = [
            *shlex.split(linker),
            *shlex.split(sysconfig.get_config_var("CCSHARED") or ""),
            "-O3",
            "-DNDEBUG",
            f"-I{sysconfig.get_paths()['include']}",
            source,
            "-o",
            target,
        ]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            problem = getattr(exc, "stderr", None) or exc
            print(f"perftool: {relative} not built, {without}: {problem}", file=sys.stderr)
            return None
        return target
