"""core/ on numpy 2 (Blender 5.2 LTS runs Python 3.13 with numpy 2; the bpy 4.5 wheel here needs numpy < 2): core's
fast tests again, in a child process whose numpy is the 2.x that `make install` puts beside the venv in .numpy2/
(its DeprecationWarnings raised in core/ fail them, pytest.ini). `make test-core-numpy2` runs every core test in
a venv of its own (Python 3.13 too, with PY=python3.13)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NUMPY2 = ROOT / ".numpy2"


@pytest.mark.slow
def test_core_passes_its_fast_tests_on_numpy_2():
    if not (NUMPY2 / "numpy").is_dir():
        message = f"numpy 2 is not installed in {NUMPY2}: `make install` (or `make test`) puts it there"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(NUMPY2), os.environ.get("PYTHONPATH")) if p))
    version = subprocess.run([sys.executable, "-c", "import numpy; print(numpy.__version__)"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith("2."), version
    # "not slow": this test is slow, so the child does not run it again
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:pytest-blender", "-p", "no:cacheprovider", "-q",
                          "-m", "not slow", "tests/core"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, f"core's tests on numpy {version}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert " passed" in run.stdout.splitlines()[-1]
