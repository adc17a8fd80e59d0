"""The library command's housekeeping: thread counts that honour the environment, nothing temporary left in
the output folder after a run, every exit status explained by --help, Ray's start-up noise kept off stderr
(and nothing else of Ray's)."""

import contextlib
import io
import logging
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


def test_ray_start_up_noise_is_dropped_and_everything_else_kept(monkeypatch):
    """What ``quiet_ray_start`` does around the engine's own ray.init, without starting Ray (test_ray.py starts
    it): Ray's default working_dir excludes emptied, the RAY_NOISE notices dropped, errors and other warnings
    kept, and all of it undone afterwards."""
    from tools.motion_library import engines

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    loggers = [logging.getLogger(name) for name, _ in engines.RAY_NOISE]
    token, services = loggers
    handler = Keep()
    for lg in loggers:
        lg.addHandler(handler)
    monkeypatch.setenv("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES", ".git")
    try:
        with engines.quiet_ray_start():
            assert os.environ["RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES"] == ""
            token.warning("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt "
                          "out.")
            services.warning("WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only "
                             "67108864 bytes available.")
            services.error("Failed to start the raylet.")
            token.warning("Token authentication is disabled for this Ray cluster. Anyone with network access to the "
                          "cluster can run arbitrary code.")
        token.warning("Token authentication is enabled for this Ray cluster.")   # later: Ray's logging as it was
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    assert seen == ["Failed to start the raylet.",
                    "Token authentication is disabled for this Ray cluster. Anyone with network access to the "
                    "cluster can run arbitrary code.",
                    "Token authentication is enabled for this Ray cluster."]
    assert os.environ["RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES"] == ".git"
