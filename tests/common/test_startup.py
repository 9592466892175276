"""The command's start (perftool.common.startup): the cycle collector waits while its modules load and then skips them,
and numpy's OpenBLAS starts no threads; code that imports perftool as a library keeps its collector and its
environment as they were."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

STATE = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 0)"


def _run(program: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split("\n")[:2]


def test_the_command_loads_its_modules_with_the_collector_paused_then_freezes_them():
    program = f"import sys; sys.argv[0] = 'perftool'; import perftool, perftool.cli.main; {STATE}; "
    program += f"perftool.common.startup.loaded(); {STATE}"
    assert _run(program) == ["False False", "True True"]


@pytest.mark.parametrize("collector", ["enabled", "disabled"])
def test_a_library_import_leaves_the_collector_as_it_was(collector):
    program = f"import gc; gc.{collector[:-1]}(); import perftool, perftool.cli.main; {STATE}; "
    program += f"perftool.common.startup.loaded(); {STATE}"
    state = f"{collector == 'enabled'} False"
    assert _run(program) == [state, state]


SPAWNED = """
import gc, multiprocessing, sys

def state(_):
    import perftool
    return gc.isenabled()

if __name__ == "__main__":
    sys.argv[0] = "perftool"
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print(pool.map(state, [0])[0])
"""


def test_a_process_started_for_the_command_keeps_its_collector(tmp_path):
    """A spawned process (as Dask's local workers are) is handed the command's arguments and imports perftool afresh,
    never to call the command's main: its collector must not wait for that."""
    script = tmp_path / "spawns.py"
    script.write_text(SPAWNED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"]


BLAS = "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"


def _run_without_blas_setting(program: str) -> list[str]:
    environment = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, env=environment)
    return done.stdout.split()


def test_the_command_asks_openblas_for_no_threads_before_numpy_loads():
    program = f"import sys; sys.argv[0] = 'perftool'; import perftool; print('numpy' in sys.modules); {BLAS}"
    assert _run_without_blas_setting(program) == ["False", "1"]


def test_the_command_keeps_a_blas_setting_the_environment_makes():
    program = f"import sys; sys.argv[0] = 'perftool'; import perftool; {BLAS}"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "3"},
    )  # fmt: skip
    assert done.stdout.split() == ["3"]


def test_a_library_import_leaves_the_blas_setting_alone():
    assert _run_without_blas_setting(f"import perftool, perftool.cli.main; {BLAS}") == ["None"]
