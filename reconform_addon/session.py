"""Solves of this Blender session: the worker-thread runner, the runs in flight and the last solve per scene.

Nothing here touches bpy: ``SolveRunner`` runs a solve in a daemon thread (the worker only sees numpy / torch
objects) and queues its events for the main thread; ``_RUNNING`` holds the runs in flight (one per scene),
``_LAST`` the last solve of each scene for Re-solve (kept out of bpy data on purpose). Scenes are keyed by
``name_full``. ``on_load_pre`` is what the operators' ``load_pre`` handler does when another file is loaded.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from dataclasses import dataclass


class SolveRunner:
    """Run a solve in a daemon thread; the main thread polls ``events()``.

    ``job`` is a job with ``steps()`` (a generator) and ``cancel()`` — the ``core.pipeline.retarget.Retarget`` of a run,
    whose first steps complete the characters and copy the rotations, so all the core work runs here and the
    viewport stays responsive — or a factory ``f(say) -> job`` run in the worker first (``say(text)`` posts a
    status line). Events are tuples: ('status', text), ('progress', step), ('done', finish(job)),
    ('error', (exception, traceback text)), ('cancelled', None). ``run_sync`` does it all on the calling thread.
    """

    def __init__(self, job, finish):
        if hasattr(job, "steps"):
            self.job, self._factory = job, None
        else:
            self.job, self._factory = None, job
        self.finish = finish
        self.queue = queue.Queue()
        self.thread = None
        self.started = None
        self._cancel = threading.Event()

    def _say(self, text):
        self.queue.put(("status", str(text)))

    def _work(self):
        try:
            if self.job is None:
                self.job = self._factory(self._say)
            for p in self.job.steps():
                self.queue.put(("progress", p))
                if self._cancel.is_set():
                    break
            if self._cancel.is_set() or getattr(self.job, "cancelled", False):
                self.queue.put(("cancelled", None))
                return
            self.queue.put(("done", self.finish(self.job)))
        except Exception as ex:  # noqa: BLE001 - reported on the main thread
            if self._cancel.is_set():
                self.queue.put(("cancelled", None))
            else:
                self.queue.put(("error", (ex, traceback.format_exc())))

    def start(self):
        self.started = time.perf_counter()
        self.thread = threading.Thread(target=self._work, name="reconform-solve", daemon=True)
        self.thread.start()

    def events(self):
        out = []
        while True:
            try:
                out.append(self.queue.get_nowait())
            except queue.Empty:
                return out

    def cancel(self, wait: float = 0.0):
        """Thread-safe: stop between steps (or right after the set-up). ``wait``: seconds to join the thread."""
        self._cancel.set()
        job = self.job
        if job is not None:
            job.cancel()
        if wait and self.thread is not None:
            self.thread.join(wait)

    def run_sync(self, on_progress=None):
        """Drive the job here; returns finish's value; raises the job's exception."""
        self.started = time.perf_counter()
        if self.job is None:
            self.job = self._factory(lambda text: None)
        for p in self.job.steps():
            if on_progress:
                on_progress(p)
        return self.finish(self.job)


@dataclass
class LastSolve:
    """Module-level memory of the last solve of a scene, for Re-solve (kept out of bpy data on purpose).

    request: the operator's RetargetRequest; inputs: what was read from the scene (pipeline.Inputs); outcome:
    the core.pipeline.retarget.Outcome (characters, copy-rotations, source track, the SolveJob); options: the
    RetargetOptions it ran with; iterations: of the first solve; seconds: its duration.
    """

    source_name: str
    target_name: str
    action_name: str
    request: object
    inputs: object
    outcome: object
    options: object
    iterations: int
    seconds: float

    @property
    def job(self):
        """The SolveJob of the last solve."""
        return self.outcome.job

    @property
    def result(self):
        """The last solved Motion of the target."""
        return self.outcome.motion

    @property
    def settings(self):
        return self.options.settings


@dataclass
class LastGroupSolve:
    """The last joint retarget of partners in a scene (ReConForM §6.1), for Re-solve: request: the operator's
    GroupRequest; inputs: what was read (pipeline_group.GroupInputs); outcome: the core.pipeline.group.GroupOutcome
    (every pair's characters, copy-rotations and source track, the GroupSolveJob); iterations: of the first solve;
    seconds: its duration."""

    request: object
    inputs: object
    outcome: object
    iterations: int
    seconds: float

    @property
    def job(self):
        """The GroupSolveJob of the last joint solve."""
        return self.outcome.job


#: {scene name: LastSolve or LastGroupSolve}; Re-solve warm-starts from here.
_LAST: dict = {}
#: {scene name: SolveRunner} of runs in progress (one per scene).
_RUNNING: dict = {}


def last_solve(scene):
    return _LAST.get(scene.name_full)


def remember(scene, last):
    """Keep ``last`` (a LastSolve or LastGroupSolve) as the scene's last solve (Re-solve starts from it)."""
    _LAST[scene.name_full] = last


def forget(scene=None):
    """Drop cached solves (all scenes, or one)."""
    if scene is None:
        _LAST.clear()
    else:
        _LAST.pop(scene.name_full, None)


def is_running(scene) -> bool:
    return scene.name_full in _RUNNING


def track(scene, runner):
    """``runner`` is the scene's run in flight (``is_running`` is True until ``untrack``)."""
    _RUNNING[scene.name_full] = runner


def untrack(scene):
    _RUNNING.pop(scene.name_full, None)


def cancel_all():
    """Cancel every solve in flight and forget them (a failing cancel does not stop the others)."""
    for r in list(_RUNNING.values()):
        try:
            r.cancel()
        except Exception:  # noqa: BLE001
            pass
    _RUNNING.clear()


def on_load_pre():
    """A file is being loaded: stop every solve in flight (their results would have nowhere to go) and forget
    the cached last solves: they belong to the old file, and a Re-solve must not write into objects of the new
    file that happen to share a name with them."""
    cancel_all()
    _LAST.clear()
