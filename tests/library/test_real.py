"""The library runner with the real retarget (tools/retarget.py on the bpy wheel) on ../shared/assets: the local
pool (copy-rotations, one ReConForM job, an unreadable clip), a job process killed mid-job, and the Ray engine
on a local Ray instance this test starts. Short clips keep it affordable."""

import json
import os
import signal
import time

import pytest

from tests.library.helpers import events
from tests.library.test_cli import cli, wait_for
from tools.motion_library import inputs
from tools.motion_library.runner import Options

pytestmark = [pytest.mark.slow, pytest.mark.assets]
WALK = "motions/NC_bandai_walk_normal_001.bvh"
GIRL = "characters/mh_teen_girl.glb"


def test_pool_runs_the_real_retarget_and_an_unreadable_clip_fails_alone(assets, tmp_path):
    (tmp_path / "garbage.bvh").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "reconform.json").write_text(json.dumps({"method": "reconform",
                                                         "settings": {"quality": "fast", "iterations": 5}}))
    (tmp_path / "lib.csv").write_text(
        "clip,character,frames,setup,output\n"
        f"{assets / WALK},{assets / GIRL},1-20,,\n"
        f"garbage.bvh,{assets / GIRL},1-20,,\n"
        f"{assets / WALK},{assets / GIRL},1-20,reconform.json,walk_reconform\n")
    out = tmp_path / "out"
    args = ["--manifest", tmp_path / "lib.csv", "--out", out, "--workers", "2", "--formats", "blend,bvh"]
    rc, _, se = cli(*args, timeout=900)
    assert rc == 4, se                                        # one job failed, the others are done
    failed = [ln for ln in se.splitlines() if ln.startswith("  failed ")]
    assert len(failed) == 1 and failed[0].startswith("  failed mh_teen_girl/garbage_f1-20/copy_rotations: ")
    assert "garbage.bvh" in failed[0]
    walk = out / "mh_teen_girl" / "NC_bandai_walk_normal_001_f1-20" / "copy_rotations"
    for name in ("NC_bandai_walk_normal_001_f1-20.blend", "NC_bandai_walk_normal_001_f1-20.bvh", "report.json",
                 "series.json", "job.json"):
        assert (walk / name).stat().st_size > 0, name
    rep = json.loads((walk / "report.json").read_text())
    assert rep["method"] == "copy_rotations" and rep["frames"] == 20 and rep["target"]["armature"] == "mh_teen_girl_rig"
    rc_dir = out / "mh_teen_girl" / "walk_reconform" / "reconform-fast"
    rep = json.loads((rc_dir / "report.json").read_text())
    assert rep["method"] == "reconform" and rep["metrics"]["grounded_f1"] is not None
    assert rep["reference_metrics"]["grounded_f1"] is not None
    series = json.loads((rc_dir / "series.json").read_text())
    assert sorted(series["foot_height"]) == ["copy_rotations", "result", "source"]
    assert all(len(series["foot_height"][k][side]) == 20 for k in series["foot_height"] for side in (0, 1))
    # the source's feet stand on its floor somewhere in a walk: some frame's lowest foot is within 2 % of h_c
    assert min(min(abs(v) for v in side) for side in series["foot_height"]["source"]) < 0.02
    assert json.loads((rc_dir / "setup.json").read_text())["settings"]["num_threads"] == 1
    page = (out / "report" / "index.html").read_text()
    table = page.split('<table id="jobs">')[1]
    assert table.index("garbage_f1-20") < table.index("walk_reconform") and "metrics.png" in page
    assert not (out / "mh_teen_girl" / "garbage_f1-20").exists()
    assert not (out / ".partial").exists()                  # no temporary folder left
    starts = len(events(out, "start"))
    rc, _, se = cli(*args, "--no-report", timeout=300)
    assert rc == 4 and len(events(out, "start")) == starts     # done jobs skipped, the failed one held
    assert "1 failed before (not retried: --retry-failed)" in se


def _job_process(out, key_part):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if "tools/retarget.py" in cmd and str(out) in cmd and key_part in cmd:
            return int(pid)
    return None


def test_a_killed_job_process_is_retried_once_and_the_other_job_goes_on(assets, tmp_path):
    out = tmp_path / "out"
    args = ["--motions", assets / WALK, assets / "motions/NC_bandai_kick_normal_001.bvh", "--characters",
            assets / GIRL, "--frames", 1, 15, "--out", out, "--workers", "2", "--no-report"]
    from tests.library.test_cli import start
    p = start(*args)
    assert wait_for(lambda: _job_process(out, "walk_normal") is not None, 120)
    time.sleep(2.0)                                           # mid-job: importing, retargeting
    os.kill(_job_process(out, "walk_normal"), signal.SIGKILL)
    so, se = p.communicate(timeout=600)
    assert p.returncode == 0, se
    ends = [(e["key"].split("/")[1], e["attempt"], e["outcome"]) for e in events(out, "end")]
    assert ("NC_bandai_walk_normal_001_f1-15", 1, "crashed") in ends
    assert ("NC_bandai_walk_normal_001_f1-15", 2, "ok") in ends
    assert ("NC_bandai_kick_normal_001_f1-15", 1, "ok") in ends and len(ends) == 3
    assert "killed by SIGKILL (retrying once)" in se
    for clip in ("walk_normal_001", "kick_normal_001"):
        assert (out / "mh_teen_girl" / f"NC_bandai_{clip}_f1-15" / "copy_rotations" / "job.json").exists()


def test_ray_engine_on_a_local_instance(assets, tmp_path):
    ray = pytest.importorskip("ray")
    from tests.library.helpers import run
    from tools.motion_library.engines import RayEngine

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        jobs = inputs.glob_jobs([str(assets / WALK), str(assets / "motions/NC_bandai_kick_normal_001.bvh")],
                                [str(assets / GIRL)], {}, frames=(1, 10))
        engine = RayEngine(threads=1, memory_mb=1500)
        assert engine.capacity() == 2 and "Ray, 1 node, 2 CPUs" in engine.describe()
        plan, s, text = run(tmp_path / "out", jobs, options=Options(formats=("fbx",)), engine=engine)
        assert (s.ok, s.failed) == (2, 0), text
        for p in plan:
            folder = tmp_path / "out" / p.task.key
            assert (folder / f"{p.task.key.split('/')[1]}.fbx").stat().st_size > 0
            assert json.loads((folder / "report.json").read_text())["frames"] == 10
        assert ray.is_initialized()                           # the caller's connection is left to the caller
        ends = events(tmp_path / "out", "end")
        assert {e["outcome"] for e in ends} == {"ok"} and all(e["peak_rss_mb"] > 100 for e in ends)
    finally:
        ray.shutdown()
