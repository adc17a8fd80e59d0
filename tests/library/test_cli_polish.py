"""The library command's housekeeping: thread counts that honour the environment, nothing temporary left in
the output folder after a run, every exit status explained by --help."""

import contextlib
import io
import os

import pytest

from tests.library.helpers import character, clip, jobs_for, run, stand_in_python
from tools.motion_library import cli
from tools.motion_library.jobs import PARTIAL
from tools.motion_library.runner import Options

ARGS = ["--motions", "a.bvh", "--characters", "b.glb", "--out", "o"]


@pytest.mark.parametrize("variable", cli.THREAD_VARIABLES)
def test_threads_per_job_honour_the_environment(monkeypatch, variable):
    monkeypatch.setattr(cli, "cores", lambda: 8)
    for name in cli.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    args = cli.parse_args(ARGS + ["--workers", "2"])
    assert cli.workers_and_threads(args) == (2, 4)           # nothing set: the cores shared out
    monkeypatch.setenv(variable, "1")
    assert cli.workers_and_threads(args) == (2, 1)           # the environment says 1: 1
    assert cli.workers_and_threads(cli.parse_args(ARGS + ["--workers", "2", "--threads", "3"])) == (2, 3)
    monkeypatch.setenv(variable, "many")                     # not a number: ignored
    assert cli.workers_and_threads(args) == (2, 4)


def test_a_run_leaves_no_scratch_folder(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    plan, s, text = run(out, jobs_for([clip(src, "walk.bvh")], [character(src, "hero.glb")]),
                        options=Options(python=py))
    assert s.ok == 1
    assert not os.path.exists(out / PARTIAL), os.listdir(out / PARTIAL)


def test_help_lists_every_exit_status():
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    help_text = text.getvalue()
    for code in (0, 1, 2, 3, 4, 130):
        assert f"\n  {code:<4} " in help_text, help_text
    assert "some jobs failed" in help_text and "run the same command again" in help_text
