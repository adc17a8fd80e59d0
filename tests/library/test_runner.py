"""The library runner on the local pool, with a stand-in job process (tests/library/stand_in_job.py: the
retarget command's contract in a fraction of a second): outputs published whole or not at all, resume and
hashing, failures recorded and held, a killed job retried once while the others go on, cancel and timeout,
progress, the Blender-binary command line, the report."""

import io
import json
import os
import re
import threading
import time

import pytest

from tests.library.helpers import character, clip, events, jobs_for, run, stand_in_python
from tools.motion_library import jobs as jobs_mod
from tools.motion_library import report
from tools.motion_library.jobs import PARTIAL, Task, code_version, output_names, run_job
from tools.motion_library.progress import Progress, choose
from tools.motion_library.runner import Options


@pytest.fixture
def py(tmp_path):
    return stand_in_python(tmp_path)


def files(out, key):
    folder = os.path.join(out, key)
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def partial_empty(out):
    p = os.path.join(out, PARTIAL)
    return not os.path.isdir(p) or not os.listdir(p)


def test_jobs_publish_every_output_and_resume_skips_them(tmp_path, py):
    src = tmp_path / "in"
    clips = [clip(src, "walk.bvh"), clip(src, "run.bvh")]
    chars = [character(src, "hero.glb"), character(src, "heavy.glb")]
    out = tmp_path / "out"
    opts = Options(formats=("blend", "fbx"), threads=1, python=py)
    plan, s, text = run(out, jobs_for(clips, chars, {"method": "reconform"}), options=opts)
    assert (s.ok, s.failed, s.skipped) == (4, 0, 0) and all(p.status == "new" for p in plan)
    for p in plan:
        names = files(out, p.task.key)
        assert set(output_names(p.task.key, opts.formats)) <= set(names), names
        record = json.load(open(out / p.task.key / "job.json"))
        assert record["hash"] == p.task.hash and record["parts"]["code"] == code_version()
        log = (out / p.task.key / "job.log").read_text()
        assert "threads 1 " in log and '"num_threads": 1' in log      # torch threads reach the job
    assert partial_empty(out)
    assert len(events(out, "start")) == 4 and len(events(out, "end")) == 4
    assert text.count("[library] ok") == 4

    # a second run does nothing
    plan, s, _ = run(out, jobs_for(clips, chars, {"method": "reconform"}), options=opts)
    assert [p.status for p in plan] == ["done"] * 4 and s.ok == 0 and s.skipped == 4
    assert len(events(out, "start")) == 4

    # what changes a job's hash: the clip's content, the set-up of one character, the options, a lost output
    (src / "walk.bvh").write_text(json.dumps({"score": 0.5}))
    os.remove(out / "hero" / "run" / "reconform-balanced" / "run.fbx")   # named by the clip, not the method
    jobs = jobs_for(clips, chars, {"method": "reconform", "characters": {"heavy": {"settings": {"w_pen": 2}}}})
    plan, _, _ = run(out, jobs, options=opts)
    reasons = {p.task.key.rsplit("/", 1)[0]: (p.status, p.reason) for p in plan}
    assert reasons["hero/walk"] == ("changed", "changed: clip")
    assert reasons["heavy/walk"] == ("changed", "changed: clip, setup")
    assert reasons["heavy/run"] == ("changed", "changed: setup")
    assert reasons["hero/run"] == ("changed", "run.fbx is missing")
    plan, _, _ = run(out, jobs, options=Options(formats=("blend",), threads=1, python=py))
    assert {p.reason for p in plan} == {"changed: options"}


def test_code_version_follows_the_code(tmp_path):
    for rel in ("core/a.py", "reconform_addon/b.py", "tools/retarget.py", "tools/extension.py", "docs/x.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1")
    v0 = code_version(tmp_path)
    (tmp_path / "docs" / "x.md").write_text("2")            # docs are not code
    assert code_version(tmp_path) == v0
    (tmp_path / "core" / "a.py").write_text("2")
    v1 = code_version(tmp_path)
    assert v1 != v0
    (tmp_path / "core" / "data.npz").write_text("3")         # data files under core count
    assert code_version(tmp_path) != v1


def test_failed_job_is_recorded_held_and_retried_on_request(tmp_path, py):
    src = tmp_path / "in"
    bad = clip(src, "bad.bvh", error="Cannot import 'bad.bvh': not a BVH file (line 1: 'garbage').")
    good = clip(src, "good.bvh")
    out = tmp_path / "out"
    opts = Options(python=py)
    jobs = jobs_for([bad, good], [character(src, "hero.glb")])
    plan, s, text = run(out, jobs, options=opts)
    assert (s.ok, s.failed) == (1, 1)
    bad_key = "hero/bad/copy_rotations"
    assert s.failures == [(bad_key, "Cannot import 'bad.bvh': not a BVH file (line 1: 'garbage').")]
    assert f"[library] failed  {bad_key}: Cannot import" in text
    assert files(out, bad_key) == [] and partial_empty(out)
    log = (out / "failed" / "hero" / "bad" / "copy_rotations.log").read_text()
    assert log.startswith(f"job {bad_key} attempt 1: Cannot import") and "error: Cannot import" in log

    plan, s, _ = run(out, jobs, options=opts)
    status = {p.task.key: (p.status, p.runs, p.reason) for p in plan}
    assert status[bad_key][:2] == ("failed", False) and "failed before: Cannot import" in status[bad_key][2]
    assert s.held == 1 and len(events(out, "start")) == 2         # nothing ran again

    plan, s, _ = run(out, jobs, options=Options(python=py, retry_failed=True))
    assert [p.task.key for p in plan if p.runs] == [bad_key] and s.failed == 1

    (src / "bad.bvh").write_text("{}")                                # the user fixes the clip
    plan, s, _ = run(out, jobs, options=opts)
    assert [(p.task.key, p.reason) for p in plan if p.runs] == [(bad_key, "changed since it failed")]
    assert s.ok == 1 and not (out / "failed" / "hero" / "bad" / "copy_rotations.log").exists()


def test_killed_job_is_retried_once_and_the_others_go_on(tmp_path, py):
    src = tmp_path / "in"
    flag = tmp_path / "killed_once"
    clips = [clip(src, "a.bvh", sleep=0.3, kill_once=str(flag)), clip(src, "b.bvh", kill_always=True),
             clip(src, "c.bvh", sleep=0.5), clip(src, "d.bvh")]
    out = tmp_path / "out"
    plan, s, text = run(out, jobs_for(clips, [character(src, "hero.glb")]), options=Options(python=py))
    assert (s.ok, s.failed) == (3, 1) and flag.exists()
    assert s.failures == [("hero/b/copy_rotations", "the job's process was killed by SIGKILL")]
    ends = [(e["key"].rsplit("/", 1)[0], e["attempt"], e["outcome"], e["retry"]) for e in events(out, "end")]
    assert ("hero/a", 1, "crashed", True) in ends and ("hero/a", 2, "ok", False) in ends
    assert ("hero/b", 1, "crashed", True) in ends and ("hero/b", 2, "crashed", False) in ends
    assert [k for k, a, o, r in ends].count("hero/c") == 1
    assert "hero/a/copy_rotations: the job's process was killed by SIGKILL (retrying once)" in text
    assert files(out, "hero/b/copy_rotations") == [] and "job.json" in files(out, "hero/a/copy_rotations")
    assert partial_empty(out)


def test_nothing_is_published_unless_every_output_is_there(tmp_path, py):
    src = tmp_path / "in"
    out = tmp_path / "out"
    jobs = jobs_for([clip(src, "w.bvh", skip="series.json")], [character(src, "hero.glb")])
    _, s, _ = run(out, jobs, options=Options(python=py))
    assert s.failures == [("hero/w/copy_rotations", "the retarget exited 0 but wrote no series.json")]
    assert files(out, "hero/w/copy_rotations") == [] and partial_empty(out)


def _task(tmp_path, py, **spec):
    src = tmp_path / "in"
    job = jobs_for([clip(src, "w.bvh", **spec)], [character(src, "hero.glb")])[0]
    return Task(job.key, job.clip, job.character, None, None, {}, None, ("blend", "fbx"), str(tmp_path / "out"),
                "h", {}, 1, py)


def test_cancel_and_timeout_stop_the_process_and_leave_nothing(tmp_path, py, monkeypatch):
    monkeypatch.setattr(jobs_mod, "TERM_GRACE_S", 2.0)
    task = _task(tmp_path, py, sleep_after=60)          # writes its first output, then hangs
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()
    t = time.monotonic()
    res = run_job(task, cancel)
    assert res["outcome"] == "cancelled" and time.monotonic() - t < 10
    assert not os.path.exists(tmp_path / "out" / "hero") and partial_empty(tmp_path / "out")
    assert not os.path.exists(f"/proc/{res['pid']}")
    res = run_job(Task(**{**task.__dict__, "timeout": 1.0}))
    assert res["outcome"] == "failed" and res["error"] == "timed out after 1 s (--job-timeout)"
    assert not os.path.exists(tmp_path / "out" / "hero") and partial_empty(tmp_path / "out")
    assert (tmp_path / "out" / "failed" / "hero" / "w" / "copy_rotations.log").exists()


def test_blender_binary_command_line(tmp_path, py):
    src = tmp_path / "in"
    out = tmp_path / "out"
    _, s, _ = run(out, jobs_for([clip(src, "w.bvh")], [character(src, "hero.glb")]),
                  options=Options(blender=py, formats=("fbx",)))
    assert s.ok == 1
    cmd = jobs_mod.command(Task("hero/w/reconform-best", "c", "t", None, None, {}, None, ("fbx",), str(out), "h", {},
                                blender="B"), "/tmp/x")
    assert cmd[:8] == ["B", "-b", "--factory-startup", "--python-exit-code", "1", "--python",
                       str(jobs_mod.RETARGET), "--"]
    assert cmd[8:12] == ["--source", "c", "--target", "t"] and cmd[-2:] == ["--export", "/tmp/x/w.fbx"]


def _progress_text(mode: str) -> str:
    buf = io.StringIO()
    p = Progress(3, buf, mode=mode, every_s=0.0)
    p.started()
    p.started()
    time.sleep(0.2)
    p.ended("hero/walk/copy_rotations", {"outcome": "ok", "frames": 120, "seconds": 2.0})
    p.ended("hero/run/copy_rotations", {"outcome": "failed", "error": "no such file"})
    p.tick()
    p.close()
    return buf.getvalue()


def test_progress_bar_shows_jobs_done_failed_and_the_time_left():
    text = _progress_text("bar")
    last = text.rstrip("\n").split("\r")[-1]                  # the bar as last drawn (tqdm redraws it with \r)
    assert re.fullmatch(r"\[library\] 2/3 \|[ #0-9]+\| done 1 \| failed 1 \| running 0 \| \d+ frames/s \| "
                        r"elapsed 00:0\d \| ETA 00:0\d", last), last
    assert "[library] failed  hero/run/copy_rotations: no such file\n" in text   # a failure, above the bar
    assert "[library] ok" not in text                          # finished jobs only move the bar


def test_progress_lines_for_logs_and_none():
    text = _progress_text("lines")
    assert "[library] ok      hero/walk/copy_rotations (120 frames, 2.0 s) [1/3]\n" in text
    assert "[library] failed  hero/run/copy_rotations: no such file\n" in text
    assert "[library] 2/3 | done 1 | failed 1 | running 0 | " in text and "| ETA 0:00:0" in text   # status line
    assert "\r" not in text and "|#" not in text
    assert _progress_text("none") == ""


def test_progress_auto_is_the_bar_on_a_terminal_only():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert choose("auto", Terminal()) == "bar" and choose("auto", io.StringIO()) == "lines"
    assert choose("auto", io.StringIO(), tty=True) == "bar" and choose("auto", Terminal(), tty=False) == "lines"
    assert choose("lines", Terminal()) == "lines" and choose("none", Terminal()) == "none"


@pytest.mark.slow
def test_report_lists_failures_then_worst_jobs_with_figures(tmp_path, py):
    src = tmp_path / "in"
    clips = [clip(src, "good.bvh", score=0.95), clip(src, "poor.bvh", score=0.2), clip(src, "mid.bvh", score=0.6),
             clip(src, "broken.bvh", error="Armature 'x' deforms no mesh.")]
    out = tmp_path / "out"
    plan, s, _ = run(out, jobs_for(clips, [character(src, "hero.glb")], {"method": "reconform"}),
                     options=Options(python=py))
    path = report.write(str(out), plan, worst=2)
    rows = report.collect(str(out), plan)
    assert [r["key"] for r in rows] == [f"hero/{c}/reconform-balanced" for c in ("broken", "poor", "mid", "good")]
    assert rows[1]["score"] == pytest.approx(0.2) and rows[0]["error"] == "Armature 'x' deforms no mesh."
    page = open(path, encoding="utf-8").read()
    order = [page.index(t) for t in ("hero</td><td>broken</td><td>reconform-balanced", "poor.bvh", "mid.bvh",
                                       "good.bvh")]
    assert order == sorted(order)
    assert "Armature &#x27;x&#x27; deforms no mesh." in page and 'class="better"' in page
    folder = os.path.dirname(path)
    pngs = sorted(n for n in os.listdir(folder) if n.endswith(".png"))
    assert pngs == ["feet_1.png", "feet_2.png", "metrics.png", "throughput.png"]
    for n in pngs:
        assert open(os.path.join(folder, n), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        assert f'src="{n}"' in page
    # the report alone, from the folder (no plan): the same rows
    assert [r["key"] for r in report.collect(str(out))] == [r["key"] for r in rows]


def test_one_run_at_a_time_per_output_folder(tmp_path, py):
    from tools.motion_library.engines import LocalPool
    from tools.motion_library.inputs import InputError
    from tools.motion_library.runner import Runner
    src, out = tmp_path / "in", tmp_path / "out"
    jobs = jobs_for([clip(src, "w.bvh")], [character(src, "hero.glb")])
    first = Runner(str(out), jobs, Options(python=py), stream=io.StringIO(), tty=False)
    first._take_lock()
    second = Runner(str(out), jobs, Options(python=py), stream=io.StringIO(), tty=False)
    with pytest.raises(InputError, match=f"Another library run is writing .* \\(process {os.getpid()}\\)"):
        second.run(second.plan(), LocalPool(1))
    first._release_lock()
    assert second.run(second.plan(), LocalPool(1)).ok == 1


def test_ctrl_c_is_read_between_waits_never_raised_inside_the_engine(tmp_path, py):
    """Ctrl+C during the engine's wait must not raise inside it (a KeyboardInterrupt inside concurrent.futures'
    locks could leave a worker thread blocked forever and the run hanging): the wait finishes, then the run
    stops its jobs and reports itself interrupted."""
    import signal
    from tools.motion_library.engines import LocalPool
    from tools.motion_library.runner import Runner

    class CtrlCInWait(LocalPool):
        waits = raised_inside = 0

        def wait(self, timeout):
            CtrlCInWait.waits += 1
            try:
                os.kill(os.getpid(), signal.SIGINT)      # delivered to the main thread, here
                time.sleep(0.2)                          # the old runner raised KeyboardInterrupt in this sleep
            except KeyboardInterrupt:
                CtrlCInWait.raised_inside += 1
                raise
            return super().wait(0.01)

    src, out = tmp_path / "in", tmp_path / "out"
    jobs = jobs_for([clip(src, f"c{k}.bvh", sleep_after=60) for k in range(3)], [character(src, "hero.glb")])
    runner = Runner(str(out), jobs, Options(python=py), stream=io.StringIO(), tty=False)
    before = signal.getsignal(signal.SIGINT)
    t = time.monotonic()
    s = runner.run(runner.plan(), CtrlCInWait(2))
    assert s.interrupted and CtrlCInWait.waits >= 1 and CtrlCInWait.raised_inside == 0
    assert s.cancelled == 2 and s.not_started == 1 and s.ok == 0
    assert time.monotonic() - t < 30 and partial_empty(out)
    assert signal.getsignal(signal.SIGINT) is before   # the handler is put back
