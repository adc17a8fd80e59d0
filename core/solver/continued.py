"""A re-solve that reuses its first solve's set-up (issue 16 item 1; docs/solver.md
"Re-solve").

The panel's Re-solve and ``core.solver.conflicts.resolve`` change per-part weights (the conflict sliders) and how many
steps to take (the re-solve's ``WarmSchedule``); the characters, the clip, copy-rotations, the terrain and every other
setting stay. A new ``SolveJob`` then builds again what does not depend on those weights (the soles, the source's paths
and floor, the foot model, the pair and barrier caches, the variables' chain) and fits the last result back into control
points. ``continued`` instead copies the finished job, shares all of that, takes its control points as they are (the
exact start a warm start fits), computes again only what the weights change (the per-key-vertex multipliers, the
reference scales, copy-rotations' objective) and continues its optimiser. ``continued_group`` does the same for a joint
solve (``core.solver.conflicts.resolve_group``).
"""

from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np

from .graphed import graphed_pose
from .group import GroupSolveJob
from .job import SolveJob
from .lifecycle import StepLifecycle
from .optim import deterministic, torch_threads
from .settings import CONTINUE, RESOLVE, WarmSchedule

#: the settings a re-solve may change and still continue its first solve's set-up
CONTINUABLE = frozenset({"part_weights", "num_threads"})


def _same(a, b) -> bool:
    """Whether two setting values are equal: plain values and tuples of them by value, anything else by
    identity (an array of floor levels)."""
    plain = (bool, int, float, str, type(None))
    if a is b:
        return True
    if isinstance(a, plain) and isinstance(b, plain):
        return a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return False


def can_continue(job, settings, source, source_motion, target, init_motion, terrain=None) -> bool:
    """Whether a re-solve of these characters, clip and start on ``terrain`` at ``settings`` can continue the
    finished ``job`` (``continued``): the same Character objects, clip and terrain object, the same copy-rotations
    start, and settings that differ from the job's only in ``CONTINUABLE`` fields."""
    if job is None or not job.done or job.cancelled or job.source is not source or job.target is not target:
        return False
    if job.terrain is not terrain:
        return False
    if job.source_motion is not source_motion and not _same_motion(job.source_motion, source_motion):
        return False
    if not _same_motion(job.init_motion, init_motion):
        return False
    return all(_same(getattr(job.settings, f.name), getattr(settings, f.name))
               for f in dataclasses.fields(settings) if f.name not in CONTINUABLE)


def _same_motion(a, b) -> bool:
    return (a.num_frames == b.num_frames and a.frame_start == b.frame_start and abs(a.fps - b.fps) < 1e-9
            and np.array_equal(a.rotations, b.rotations) and np.array_equal(a.locations, b.locations))


def continued(job, settings, result=None, schedule=CONTINUE):
    """A warm-started re-solve of the finished ``job`` at ``settings`` (``can_continue``) for ``schedule``
    (``WarmSchedule``), set up and ready to step: what ``SolveJob(job.source, job.source_motion, job.target,
    job.init_motion, settings, warm_start=job.result(), warm_sixd=job.result_sixd(), warm_state=job.optim,
    continue_schedule=schedule, terrain=job.terrain)`` would solve, from the same control points and optimiser
    state, without its set-up. ``job`` itself is left as it was (its result and optimiser); the caches the two
    share are exact whatever state they are in. ``result``: ``job.result()`` when the caller has it."""
    t0 = time.perf_counter()
    new = copy.copy(job)
    StepLifecycle.__init__(new)
    new.settings = settings
    new.continue_schedule = WarmSchedule(*schedule)
    new.warm_start = job.result() if result is None else result
    new.warm_sixd, new.warm_state = None, job.optim          # its control points are taken as they are: no fit
    new.history = []
    new.yielded = []
    new.stats = {k: v for k, v in job.stats.items() if k not in ("setup_s", "solve_s", "frames_per_s",
                                                                  "pair_entries_last")}
    new.param = job.param.copy()
    new.param.require_grad()
    new.objective = job.objective.with_settings(settings)
    with torch_threads(settings.num_threads), deterministic(settings.device):   # as set-up
        new._measure_start()
        new._start_optimiser()
        new._last_entries = 0
        new._pose = graphed_pose(new)
    new._ready = True
    new.stats.update(setup_s=time.perf_counter() - t0, setup_reused=True)
    return new


def can_continue_group(group, settings_list) -> bool:
    """Whether a re-solve of the finished joint solve ``group`` with one SolverSettings per member (in its
    order) can continue it (``continued_group``): every member ``can_continue`` at its settings."""
    if group is None or not group.done or group.cancelled or group.optim is None:
        return False
    if len(settings_list) != len(group.members):
        return False
    return all(can_continue(m, s, m.source, m.source_motion, m.target, m.init_motion, m.terrain)
               for m, s in zip(group.members, settings_list))


def continued_group(group, settings_list, schedule=CONTINUE) -> GroupSolveJob:
    """The warm-started re-solve of the finished joint solve ``group`` (``can_continue_group``) for ``schedule``,
    set up and ready to step: each member ``continued`` at its settings, the terms between the characters at their
    new per-part weights, the group's optimiser continued (``GroupSolveJob.continue_from``). ``group`` is left as
    it was."""
    members = [continued(m, s, schedule=schedule) for m, s in zip(group.members, settings_list)]
    new = GroupSolveJob(members, members[0].settings)
    new.continue_from(group)
    return new


def solve_job(source, source_motion, target, init_motion, settings, source_track=None, warm_start=None,
              warm_sixd=None, warm_state=None, warm_job=None, warm_schedule=RESOLVE, continue_schedule=CONTINUE,
              terrain=None):
    """The SolveJob of a retarget (``core.pipeline.retarget``) on ``terrain``: ``continued(warm_job, settings)`` at
    ``continue_schedule`` for a re-solve that can continue its first solve (``warm_job``, whose result
    ``warm_start`` is), else a new one (a re-solve continuing ``warm_state`` at ``continue_schedule``, or with a
    new optimiser at ``warm_schedule``)."""
    if warm_start is not None and can_continue(warm_job, settings, source, source_motion, target, init_motion,
                                               terrain):
        result = warm_job.result()
        if _same_motion(result, warm_start):
            return continued(warm_job, settings, result, continue_schedule)
    return SolveJob(source, source_motion, target, init_motion, settings, warm_start=warm_start,
                    source_track=source_track, warm_sixd=warm_sixd, warm_state=warm_state, warm_schedule=warm_schedule,
                    continue_schedule=continue_schedule, terrain=terrain)


__all__ = ["CONTINUABLE", "can_continue", "can_continue_group", "continued", "continued_group", "solve_job"]
