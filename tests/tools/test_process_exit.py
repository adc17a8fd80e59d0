"""The bpy wheel's processes end through ``tools.extension.exit_process`` (docs/decisions.md "The bpy wheel's
exit"): the test suite's own process keeps pytest's exit status, and Blender's session folder is removed."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

TEST = '''
import pathlib, bpy, torch

def test_it():
    pathlib.Path({note!r}).write_text(bpy.app.tempdir)
    assert torch.ones(1).item() == {value}
'''


@pytest.mark.parametrize("value, status", [(1, 0), (2, 1)])
def test_a_test_run_with_bpy_and_torch_ends_with_pytests_status(tmp_path, value, status):
    pytest.importorskip("bpy")
    note = tmp_path / "tempdir.txt"
    (tmp_path / "test_probe.py").write_text(TEST.format(note=str(note), value=value))
    env = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:pytest-blender", "-p", "tests.conftest", "-q",
                        "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == status, p.stdout + p.stderr
    assert ("1 passed" if status == 0 else "1 failed") in p.stdout           # pytest's summary was flushed
    session_tmp = note.read_text()
    assert os.path.basename(session_tmp.rstrip(os.sep)).startswith("blender_")
    assert not os.path.exists(session_tmp)                                    # removed as Blender would


SCRIPT = '''
import atexit, sys
sys.path.insert(0, {tools!r})
import bpy, torch
import extension
atexit.register(print, "python's shutdown ran")

def main():
    print("ran", flush=True)
    {body}

extension.exit_after(main)
'''


@pytest.mark.parametrize("body, status, err", [
    ("return 3", 3, None),
    ("raise SystemExit('error: no such file')", 1, "error: no such file"),
    ("raise ValueError('boom')", 1, "ValueError: boom"),
])
def test_a_command_ends_with_its_status_whatever_leaves_main(tmp_path, body, status, err):
    """extension.exit_after with bpy and torch loaded: a returned status, a SystemExit message and an exception's
    traceback each end the process (never Python's shutdown) with the status Python would have given."""
    pytest.importorskip("bpy")
    script = tmp_path / "cmd.py"
    script.write_text(SCRIPT.format(tools=str(ROOT / "tools"), body=body))
    env = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    p = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == status and p.stdout.startswith("ran"), p.stderr[-2000:]
    assert "shutdown ran" not in p.stdout                  # left through exit_process, not Python's shutdown
    if err:
        assert err in p.stderr
