"""reconform_addon.session: the solve runner's events and cancel, the runs in flight, the last solve per scene
and what loading another file does to them. No assets, no solver: fake jobs."""

import threading
import time

import pytest

from .ui_helpers import FakeJob, ui

bpy = pytest.importorskip("bpy")


def test_solve_runner_events_and_cancel(addon):
    session = ui(addon, "session")
    gate = threading.Event()
    job = FakeJob(result="R", total=50, gate=gate)
    runner = session.SolveRunner(job, finish=lambda j: ("finished", j.result()))
    runner.start()
    gate.set()
    runner.thread.join(10)
    evs = runner.events()
    assert [k for k, _ in evs].count("progress") == 50 and evs[-1] == ("done", ("finished", "R"))
    assert [p.step for k, p in evs if k == "progress"] == list(range(1, 51))
    # cancel while blocked: the worker stops before the next step and reports 'cancelled'
    gate2 = threading.Event()
    job2 = FakeJob(result="R", total=50, gate=gate2)
    r2 = session.SolveRunner(lambda say: (say("setting up"), job2)[1], finish=lambda j: "never")
    r2.start()
    time.sleep(0.05)
    r2.cancel()
    gate2.set()
    r2.thread.join(10)
    kinds = [k for k, _ in r2.events()]
    assert kinds[0] == "status" and kinds[-1] == "cancelled" and "done" not in kinds
    assert job2.stepped < 50


def test_run_sync_drives_the_factory_on_this_thread(addon):
    session = ui(addon, "session")
    seen = []
    runner = session.SolveRunner(lambda say: FakeJob(result="R", total=3), finish=lambda j: j.result())
    assert runner.run_sync(on_progress=lambda p: seen.append(p.step)) == "R" and seen == [1, 2, 3]
    failing = session.SolveRunner(FakeJob(result=None, total=4, fail_at=1), finish=lambda j: None)
    with pytest.raises(RuntimeError, match="boom at step 1"):
        failing.run_sync()


def test_loading_a_file_cancels_runs_and_forgets_last_solves(addon, clean_scene, tmp_path):
    """The operators' load_pre handler: every run in flight is cancelled, every cached solve forgotten."""
    session = ui(addon, "session")
    scene = clean_scene
    gate = threading.Event()
    job = FakeJob(result="R", total=50, gate=gate)
    runner = session.SolveRunner(job, finish=lambda j: j.result())
    session.track(scene, runner)
    session.remember(scene, "a LastSolve")
    assert session.is_running(scene) and session.last_solve(scene) == "a LastSolve"
    runner.start()
    path = tmp_path / "empty.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.open_mainfile(filepath=str(path))
    gate.set()
    runner.thread.join(10)
    assert job.cancelled and not runner.thread.is_alive()
    assert not session.is_running(bpy.context.scene) and session.last_solve(bpy.context.scene) is None
    assert [k for k, _ in runner.events()][-1] == "cancelled"
