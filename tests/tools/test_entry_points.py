"""Every command under tools/ with a command line (argparse) that ends through ``extension.exit_after`` starts:
``--help`` runs to its end with status 0, so its imports resolve (the tail imports ``extension`` from tools/, which
each script must have put on its path by then)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAIN = 'if __name__ == "__main__":'


def _command(path: pathlib.Path) -> bool:
    text = path.read_text()
    return MAIN in text and "exit_after(" in text.split(MAIN)[-1] and "ArgumentParser(" in text


SCRIPTS = sorted(str(p.relative_to(ROOT)) for folder in ("tools", "tools/bench", "tools/render", "tools/experiments")
                 for p in (ROOT / folder).glob("*.py") if _command(p))


def test_the_commands_are_found():
    assert {"tools/retarget.py", "tools/demo.py", "tools/bench/run.py", "tools/bench/bench_zoo.py"} <= set(SCRIPTS)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_command_prints_its_help(script):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "usage" in (p.stdout + p.stderr).lower()
