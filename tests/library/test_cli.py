"""tools/library.py as a command (a subprocess, with the stand-in job process): exit statuses and their one
line, --dry-run, Ctrl+C, a second run after the runner itself was killed, and a parent that never imports
bpy or torch."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.library.helpers import LIBRARY, character, clip, events, stand_in_python


def cli(*args, timeout=120, **kw):
    p = subprocess.run([sys.executable, str(LIBRARY), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, **kw)
    return p.returncode, p.stdout, p.stderr


def start(*args):
    return subprocess.Popen([sys.executable, str(LIBRARY), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(pred, timeout=60):
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        if pred():
            return True
        time.sleep(0.1)
    return False


def n_events(out, kind, **match):
    try:
        evs = events(out, kind)
    except OSError:
        return 0
    return sum(all(e.get(k) == v for k, v in match.items()) for e in evs)


def leftover_jobs(out) -> list:
    """Processes still running a job of ``out`` (their command line names its .partial folder)."""
    mine = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if str(out) in cmd and "stand_in_job.py" in cmd:
            mine.append(int(pid))
    return mine


def test_bad_manifest_exits_1_with_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "lib.csv").write_text("clip,character\nwalk.bvh,hero.glb\nwalk.bvh,hero.glb,extra\n")
    rc, so, se = cli("--manifest", tmp_path / "lib.csv", "--out", tmp_path / "out")
    assert rc == 1 and so == ""
    assert se.strip().splitlines() == ["error: lib.csv line 3: 3 cells for 2 columns (quote values with commas)."]
    assert not (tmp_path / "out").exists()
    rc, _, se = cli("--manifest", tmp_path / "lib.csv", "--motions", "x.bvh", "--out", tmp_path / "out")
    assert rc == 2 and "not both" in se


@pytest.mark.slow
def test_unknown_solver_setting_is_refused_before_any_job(tmp_path):
    (tmp_path / "setup.json").write_text(json.dumps({"settings": {"iterationz": 5}}))
    rc, _, se = cli("--motions", tmp_path / "lib.csv", "--characters", "x", "--setup", tmp_path / "setup.json",
                    "--out", tmp_path / "out")
    assert rc == 1 and se.count("error:") == 1 and "iterationz" in se


def test_dry_run_lists_what_would_run_and_why(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    clips = [clip(src, "a.bvh"), clip(src, "b.bvh", error="cannot read"), clip(src, "c.bvh")]
    hero = character(src, "hero.glb")
    rc, _, _ = cli("--motions", *clips[:2], "--characters", hero, "--out", out, "--python", py, "--no-report")
    assert rc == 4                                            # some jobs failed
    (src / "a.bvh").write_text('{"score": 0.5}')
    rc, so, _ = cli("--motions", *clips, "--characters", hero, "--out", out, "--python", py, "--dry-run")
    assert rc == 0
    assert so.splitlines() == ["run   changed       hero/a/copy_rotations  (changed: clip)",
                               "skip  failed before hero/b/copy_rotations  (failed before: cannot read)",
                               "run   new           hero/c/copy_rotations  (not run yet)",
                               "2 of 3 jobs would run: 1 changed, 1 failed before, 1 new"]
    assert n_events(out, "start") == 2                        # the dry run started nothing


def test_ctrl_c_stops_cleanly(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    clips = [clip(src, f"c{k}.bvh", sleep_after=60) for k in range(4)]
    p = start("--motions", *clips, "--characters", character(src, "hero.glb"), "--out", out, "--python", py,
              "--workers", "2", "--formats", "blend,fbx")
    assert wait_for(lambda: n_events(out, "start") == 2 and len(leftover_jobs(out)) == 2)
    time.sleep(1.0)                                           # each job has written its first output
    p.send_signal(signal.SIGINT)
    so, se = p.communicate(timeout=60)
    assert p.returncode == 130
    lines = [ln for ln in se.splitlines() if not ln.startswith("[library]")]
    assert lines == ["interrupted: 0 done, 2 cancelled, 2 not started; nothing half-written; run the same "
                     "command again to finish."]
    assert "Traceback" not in se
    assert sorted(os.listdir(out)) == [".library", "library_log.jsonl"]   # no job folder, no scratch folder
    assert leftover_jobs(out) == []
    assert [e["outcome"] for e in events(out, "end")] == ["cancelled", "cancelled"]
    assert events(out, "run_end")[-1]["interrupted"] is True


@pytest.mark.slow
def test_second_run_after_the_runner_was_killed_finishes_the_rest(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    clips = [clip(src, "a.bvh"), clip(src, "b.bvh"), clip(src, "c.bvh", sleep_after=3), clip(src, "d.bvh")]
    args = ["--motions", *clips, "--characters", character(src, "hero.glb"), "--out", out, "--python", py,
            "--workers", "1", "--no-report"]
    p = start(*args)
    assert wait_for(lambda: n_events(out, "start", key="hero/c/copy_rotations") == 1)
    assert wait_for(lambda: bool(os.path.isdir(out / ".partial") and os.listdir(out / ".partial")))
    time.sleep(0.5)
    p.kill()                                                  # the runner dies mid-job (no cleanup at all)
    p.communicate()
    assert wait_for(lambda: leftover_jobs(out) == [], 10)     # its job died with it
    assert os.listdir(out / ".partial")                       # a half job, never published
    done_before = {k: os.path.getmtime(out / k / "job.json") for k in ("hero/a/copy_rotations",
                                                                        "hero/b/copy_rotations")}
    assert not (out / "hero" / "c").exists()
    rc, _, se = cli(*args)
    assert rc == 0, se
    second = events(out)[max(i for i, e in enumerate(events(out)) if e["event"] == "run_start"):]
    assert sorted(e["key"] for e in second if e["event"] == "start") == ["hero/c/copy_rotations",
                                                                          "hero/d/copy_rotations"]
    assert {k: os.path.getmtime(out / k / "job.json") for k in done_before} == done_before
    assert not (out / ".partial").exists() and (out / "hero" / "c" / "copy_rotations" / "job.json").exists()


@pytest.mark.slow
def test_the_parent_never_imports_bpy_or_torch(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    code = ("import sys, runpy\n"
            "for m in ('bpy', 'torch', 'mathutils'): sys.modules[m] = None\n"
            f"sys.argv = ['library.py', '--motions', {clip(src, 'a.bvh')!r}, '--characters', "
            f"{character(src, 'hero.glb')!r}, '--out', {str(out)!r}, '--python', {py!r}, '--method', 'reconform']\n"
            f"runpy.run_path({str(LIBRARY)!r}, run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (out / "hero" / "a" / "reconform-balanced" / "job.json").exists()
    assert (out / "report" / "index.html").exists()


def test_default_workers_fit_the_cores_and_the_memory(monkeypatch):
    from tools.motion_library import cli as c
    monkeypatch.setattr(c, "cores", lambda: 8)
    monkeypatch.setattr(c, "memory_mb", lambda: 10000.0)
    for name in c.THREAD_VARIABLES:                        # the environment's cap: tests/library/test_cli_polish.py
        monkeypatch.delenv(name, raising=False)
    args = c.parse_args(["--motions", "a.bvh", "--characters", "b.glb", "--out", "o"])
    assert c.workers_and_threads(args) == (5, 1)           # 10 000 MB hold five jobs of 2 000 MB
    args.job_memory = 500.0
    assert c.workers_and_threads(args) == (8, 1)
    args.workers = 2
    assert c.workers_and_threads(args) == (2, 4)           # workers x threads = cores
    args.engine, args.threads = "ray", None
    assert c.workers_and_threads(args) == (0, 1)


def test_each_method_and_preset_has_its_own_folder_and_resumes_on_its_own(tmp_path):
    """A copy-rotations run, then a ReConForM run (and one with another preset) into one --out: all three results
    are kept side by side, none is skipped as done for another's sake, and each resumes on its own."""
    from tools.motion_library import report

    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    base = ["--motions", clip(src, "walk.bvh"), "--characters", character(src, "hero.glb"), "--out", out,
            "--python", py, "--formats", "blend,fbx", "--no-report"]
    runs = {"copy_rotations": [], "reconform-balanced": ["--method", "reconform"],
            "reconform-best": ["--method", "reconform", "--quality", "best"]}
    for extra in runs.values():
        rc, _, se = cli(*base, *extra)
        assert rc == 0 and "1 jobs: 1 to run, 0 done before" in se, se
    walk = out / "hero" / "walk"
    assert sorted(os.listdir(walk)) == sorted(runs)
    for folder, extra in runs.items():
        assert {"walk.blend", "walk.fbx", "report.json", "job.json"} <= set(os.listdir(walk / folder))
        rep = json.loads((walk / folder / "report.json").read_text())
        assert rep["method"] == ("copy_rotations" if not extra else "reconform")
        setup = json.loads((walk / folder / "setup.json").read_text())
        assert setup["settings"].get("quality") == ("best" if "best" in extra else None)
    for folder, extra in runs.items():                        # each is done, whatever ran after it
        rc, so, _ = cli(*base, *extra, "--dry-run")
        assert so.splitlines()[0].startswith(f"skip  done          hero/walk/{folder}  "), so
    assert n_events(out, "start") == 3
    assert [r["key"] for r in report.collect(str(out))] == [f"hero/walk/{m}" for m in sorted(runs)]


def test_a_result_of_the_older_layout_is_named_and_left_as_it_is(tmp_path):
    """A folder written before the method folders (OUT/<character>/<clip id>/job.json): the job runs into its method
    folder, the plan says why and where the older result is, and that result is left untouched."""
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    old = out / "hero" / "walk"
    old.mkdir(parents=True)
    (old / "job.json").write_text('{"hash": "0"}')
    (old / "walk.fbx").write_bytes(b"old")
    base = ["--motions", clip(src, "walk.bvh"), "--characters", character(src, "hero.glb"), "--out", out,
            "--python", py, "--formats", "fbx", "--no-report"]
    rc, so, _ = cli(*base, "--dry-run")
    assert rc == 0 and "hero/walk/ holds a result of the older layout" in so, so
    rc, _, se = cli(*base)
    assert rc == 0 and "1 jobs: 1 to run, 0 done before" in se, se
    assert (old / "copy_rotations" / "walk.fbx").stat().st_size > 0
    assert (old / "walk.fbx").read_bytes() == b"old" and (old / "job.json").read_text() == '{"hash": "0"}'


def raw_stderr(*args) -> tuple:
    """(exit status, stderr as written: no newline translation, so a bar's carriage returns stay)."""
    p = subprocess.run([sys.executable, str(LIBRARY), *map(str, args)], capture_output=True, timeout=120)
    return p.returncode, p.stderr.decode("utf-8")


def test_a_log_gets_one_line_per_job_and_no_bar(tmp_path):
    py = stand_in_python(tmp_path)
    src, out = tmp_path / "in", tmp_path / "out"
    args = ["--motions", clip(src, "a.bvh"), clip(src, "b.bvh", error="cannot read"), "--characters",
            character(src, "hero.glb"), "--python", py, "--no-report"]
    rc, se = raw_stderr(*args, "--out", out)                  # stderr is a pipe, not a terminal
    assert rc == 4
    assert "[library] ok      hero/a/copy_rotations (30 frames, " in se
    assert "[library] failed  hero/b/copy_rotations: cannot read\n" in se
    assert "\r" not in se and not any(ch in se for ch in "▏▎▍▌▋▊▉█") and "|#" not in se
    rc, se = raw_stderr(*args, "--out", tmp_path / "bar", "--progress", "bar")   # the bar, asked for
    assert rc == 4 and "[library] ok" not in se and "[library] failed  hero/b/copy_rotations: cannot read" in se
    assert "\r[library] 2/2 |" in se and "| done 1 | failed 1 | running 0 |" in se
    rc, se = raw_stderr(*args, "--out", tmp_path / "none", "--progress", "none")
    assert rc == 4 and "[library] ok" not in se and "\r" not in se
    assert "  failed hero/b/copy_rotations: cannot read" in se               # the closing lines still say it
