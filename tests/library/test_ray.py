"""The Ray engine on a real local Ray instance (no mock) with the stand-in job process: tasks declare their
resources (a CUDA job gets a GPU), a crashed job is retried once, Ctrl+C cancels the tasks in flight, and a run
that starts Ray itself shows none of Ray's start-up notices."""

import os
import re
import signal
import time

import pytest

from tests.library.helpers import character, clip, events, jobs_for, run, stand_in_python
from tests.library.test_cli import cli, leftover_jobs, n_events, start, wait_for
from tools.motion_library.runner import Options

ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")   # CI must run these

pytestmark = pytest.mark.slow


def test_ray_tasks_declare_resources_and_a_crashed_job_is_retried(tmp_path):
    from tools.motion_library.engines import RayEngine

    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    clips = [clip(src, "a.bvh"), clip(src, "gpu.bvh"), clip(src, "c.bvh", kill_once=str(tmp_path / "flag"))]
    setup = {"clips": {"gpu": {"settings": {"device": "cuda"}}}}
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)   # one logical GPU
    try:
        engine = RayEngine(threads=1, memory_mb=500, gpus_per_job=0.5)
        assert engine.capacity() == 2
        plan, s, text = run(out, jobs_for(clips, [character(src, "hero.glb")], setup), options=Options(python=py),
                            engine=engine)
        assert (s.ok, s.failed) == (3, 0), text
        assert [p.task.extra["cuda"] for p in plan] == [False, True, False]
        # Ray hands a GPU to the task that declared one, and none to the others
        assert "CUDA_VISIBLE_DEVICES='0'" in (out / "hero" / "gpu" / "copy_rotations" / "job.log").read_text()
        assert "CUDA_VISIBLE_DEVICES='0'" not in (out / "hero" / "a" / "copy_rotations" / "job.log").read_text()
        ends = [(e["key"], e["attempt"], e["outcome"]) for e in events(out, "end")]
        assert ("hero/c/copy_rotations", 1, "crashed") in ends and ("hero/c/copy_rotations", 2, "ok") in ends
        assert '"num_threads": 1' in (out / "hero" / "a" / "copy_rotations" / "job.log").read_text()
    finally:
        ray.shutdown()


def test_ctrl_c_cancels_the_ray_tasks(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    clips = [clip(src, f"c{k}.bvh", sleep_after=60) for k in range(3)]
    p = start("--motions", *clips, "--characters", character(src, "hero.glb"), "--out", out, "--python", py,
              "--engine", "ray", "--job-memory", "500")
    assert wait_for(lambda: n_events(out, "start") == 2 and len(leftover_jobs(out)) == 2, 180)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    _, se = p.communicate(timeout=120)
    assert p.returncode == 130, se
    assert "interrupted: 0 done, 2 cancelled, 1 not started; nothing half-written" in se
    assert "Traceback" not in se
    assert wait_for(lambda: leftover_jobs(out) == [], 10)
    assert not (out / ".partial").exists() and not (out / "hero").exists()   # no temporary folder left


def test_a_ray_run_shows_none_of_rays_start_up_notices(tmp_path):
    """Ray, started by the command, announces token authentication and each folder its working_dir upload leaves
    out by default (Ray's Python log lines, 'YYYY-MM-DD hh:mm:ss,ms<TAB>WARNING ...'): none reach stderr."""
    from ray._private import ray_constants

    from tools.motion_library.engines import RAY_DEFAULT_EXCLUDES, runtime_env

    # the upload leaves out what Ray's own defaults do (they are emptied while the engine starts Ray)
    assert RAY_DEFAULT_EXCLUDES == tuple(ray_constants.RAY_RUNTIME_ENV_DEFAULT_EXCLUDES.split(","))
    assert set(RAY_DEFAULT_EXCLUDES) <= set(runtime_env()["excludes"])
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    rc, _, se = cli("--motions", clip(src, "a.bvh"), "--characters", character(src, "hero.glb"), "--out", out,
                    "--python", py, "--engine", "ray", "--job-memory", "500", "--no-report", timeout=300)
    assert rc == 0, se
    ray_lines = [ln for ln in se.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING)", ln)]
    assert ray_lines == [], se
    for notice in ("Token authentication", "ignored by default when packaging", "/dev/shm", "log_to_driver"):
        assert notice not in se, se
    assert "[library] ok      hero/a/copy_rotations" in se
