"""A long clip retargeted as overlapping windows (the paper's three-second batches for online use, ReConForM
§5.3.1, put to a batch use): the same retarget on each window, the windows stitched, so the solver's memory
follows the window's length, not the clip's.

    job = WindowedRetarget(source_spec, clip, target_spec, RetargetOptions(), WindowPlan(300, 60))
    outcome = core.pipeline.retarget.run(job)       # the same Steps and Outcome as core.pipeline.retarget.Retarget

What is shared by every window, computed once on the whole clip: the complete characters, copy-rotations (the
baseline and each window's start: its root placement and terrain footing depend on the clip's first frame), a
ground object's height field (sampled over the whole clip's footprint), and the source's floor levels. Each window
is then one ``core.pipeline.retarget.Retarget`` on its frames (set-up, solve), started where the previous window put the
character: its copy-rotations start is moved horizontally by the previous result's offset at the window's first
frame (the solve changes the root's horizontal path; on flat ground every term is blind to a horizontal shift,
so nothing else differs). Consecutive windows share ``overlap`` frames, crossfaded with a C² weight (rotations
by normalised quaternion blending, locations linearly), so a seam adds no jerk step (docs/solver.md "Long clips
in windows"). The metrics are those of the stitched clip against the whole source clip, as a single retarget
measures them, measured a window's length of frames at a time (``core.metrics.scores.evaluations``' chunks: the same
values, memory flat in the clip's length). Conflicts are not detected (each window's solve is gone once
stitched): the notes say so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from ..character.complete import BuiltCharacter
from .copy_rotations import copy_rotations
from ..errors import CoreError
from ..contacts.ground import ground_levels
from .retarget import (Cancellable, Outcome, Retarget, RetargetOptions, Step, check_spec, clip_terrain,
                       complete_character, measuring, phase_steps)
from ..solver import RESOLVE, WarmSchedule
from ..solver.parametrisation import root_jacobian_inverse
from ..contacts.terrain import GroundSurface
from ..character.track import ClipTrack
from ..types import Motion

#: share of the whole run each phase ends at
_PHASE_END = {"characters": 0.05, "copy_rotations": 0.08, "windows": 0.92, "metrics": 1.0}


@dataclass(frozen=True)
class WindowPlan:
    """Windows of ``length`` frames, consecutive ones sharing ``overlap`` frames (the crossfade)."""

    length: int = 300
    overlap: int = 60

    def check(self):
        if self.length < 8:
            raise CoreError(f"A window of {self.length} frames is too short: use at least 8 frames (the solver's "
                            "jerk and foot terms need a few).")
        if not 2 <= self.overlap <= self.length // 2:
            raise CoreError(f"The windows' overlap must be 2 to half a window ({self.length // 2} frames), not "
                            f"{self.overlap}.")

    def ranges(self, num_frames: int) -> list:
        """[(start, stop)] of the fewest windows of ``length`` frames that cover frames 0..num_frames-1 with at
        least ``overlap`` frames shared at each seam, spread evenly (the first starts at 0, the last ends at the
        clip's end); one window when the clip fits in one."""
        self.check()
        if num_frames <= self.length:
            return [(0, num_frames)]
        n = int(np.ceil((num_frames - self.overlap) / (self.length - self.overlap)))
        starts = np.floor(np.linspace(0, num_frames - self.length, n) + 0.5).astype(int)
        return [(int(s), int(s) + self.length) for s in starts]


def crossfade_weight(n: int) -> np.ndarray:
    """(n,) weights of the next window across an overlap of n frames: smootherstep 6u⁵ − 15u⁴ + 10u³ at the
    frames' centres, 0 → 1 with zero first and second derivatives at both ends (the blend adds no jerk step)."""
    u = (np.arange(n) + 0.5) / n
    return u ** 3 * (u * (6.0 * u - 15.0) + 10.0)


def blend(a: Motion, b: Motion, w: np.ndarray) -> tuple:
    """(rotations, locations) of ``a`` crossfaded into ``b`` (same frames) with per-frame weights ``w`` (T,) of
    ``b``: normalised quaternion blending on the shorter arc, locations linearly."""
    qa, qb = a.rotations, b.rotations
    sign = np.where((qa * qb).sum(-1, keepdims=True) < 0.0, -1.0, 1.0)
    q = (1.0 - w)[:, None, None] * qa + w[:, None, None] * sign * qb
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    loc = (1.0 - w)[:, None, None] * a.locations + w[:, None, None] * b.locations
    return q, loc


def hips_world(target, motion: Motion) -> np.ndarray:
    """(T, 3) world position of the target's hips over ``motion``."""
    track = ClipTrack(target, motion)
    return track.world_positions[:, target.skeleton.index(target.bone_map["hips"])]


def shifted(target, motion: Motion, offset) -> Motion:
    """``motion`` with the hips moved by the world-space ``offset`` (3,) metres on every frame (through the hips'
    basis location, as the solver's root offset)."""
    root = target.skeleton.index(target.bone_map["hips"])
    jac = root_jacobian_inverse(target.skeleton, root, motion, 1.0)                       # (T, 3, 3)
    loc = motion.locations.copy()
    loc[:, root] += jac @ np.asarray(offset, dtype=np.float64)
    return Motion(motion.rotations, loc, motion.fps, motion.frame_start)


@dataclass
class ClipSetup:
    """What every window of one clip shares, computed once on the whole clip (``clip_setup``).

    Attributes:
        built: {'source'|'target': BuiltCharacter}, the complete characters.
        track: the source clip's ClipTrack (the core's channels).
        init: copy-rotations of the whole clip on the target (the source's fps and frames): each window's start.
        levels: the source's floor (a level, or (T,) levels), ``core.contacts.ground.ground_levels``.
        terrain: the target's HeightField (None: z = 0).
        notes, timings: lines for the user, seconds per phase ('characters_s', 'copy_rotations_s').
    """

    built: dict
    track: ClipTrack
    init: Motion
    levels: object
    terrain: object
    notes: list
    timings: dict

    @property
    def source(self):
        return self.built["source"].character

    @property
    def target(self):
        return self.built["target"].character


def clip_setup(source, source_motion: Motion, target, options: RetargetOptions, cancel: threading.Event):
    """Generator of Steps ('characters', 'copy_rotations'): the characters completed (specs) or taken as they
    are (complete Characters / BuiltCharacters), the source track, a ground object's height field, copy-rotations
    and the source's floor; returns the ClipSetup, or None once ``cancel`` is set."""
    timings, notes = {}, []
    t0 = time.perf_counter()
    for role, c in (("Source", source), ("Target", target)):
        check_spec(c, role, options)
    built = {}
    for k, (role, c) in enumerate((("source", source), ("target", target))):
        name = c.character.name if isinstance(c, BuiltCharacter) else c.name
        yield Step("characters", _PHASE_END["characters"] * (0.3 + 0.7 * k), f"Preparing {role} '{name}'…")
        built[role] = complete_character(c, role, options)
        notes.extend(built[role].notes)
        if cancel.is_set():
            return None
    src, tgt = built["source"].character, built["target"].character
    timings["characters_s"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    yield Step("copy_rotations", _PHASE_END["characters"], "Copying rotations…")
    track = ClipTrack(src, source_motion if src.rig is None else src.rig.to_core(source_motion))
    terrain = options.ground
    levels = ground_levels(track, options.settings.source_ground)          # read once: copy-rotations takes them
    flat = None
    if isinstance(terrain, GroundSurface):
        yield Step("copy_rotations", _PHASE_END["characters"], f"Sampling the ground '{terrain.name}'…")
        flat = copy_rotations(src, track.motion, tgt, track, source_ground=levels)
        terrain = clip_terrain(terrain, tgt, flat)
        notes.append(f"ground {terrain.report.line()}")
    init = copy_rotations(src, track.motion, tgt, track, ground=0.0 if terrain is None else terrain,
                          source_ground=levels, like=flat)
    init = Motion(init.rotations, init.locations, source_motion.fps, source_motion.frame_start)
    timings["copy_rotations_s"] = time.perf_counter() - t1
    if cancel.is_set():
        return None
    return ClipSetup(built, track, init, levels, terrain, notes, timings)


def window_job(setup: ClipSetup, source_motion: Motion, options: RetargetOptions, a: int, b: int,
               init: Motion = None, warm_start: Motion = None, warm_sixd=None,
               warm_schedule: WarmSchedule = RESOLVE) -> Retarget:
    """The ``core.pipeline.retarget.Retarget`` of frames a..b-1 (clip indices) of ``source_motion`` on ``setup``'s
    characters: started from ``init`` (default: the whole clip's copy-rotations on those frames), or from a
    ``warm_start`` result on those frames (α held at 1, at ``warm_schedule``; ``warm_sixd`` its 6D
    rotations, ``SolveJob.result_sixd``), above the source's
    floor levels of those frames and the clip's terrain; no metrics, no conflicts."""
    levels = setup.levels
    settings = replace(options.settings, source_ground=levels if np.ndim(levels) == 0 else levels[a:b])
    w_opts = replace(options, init_motion=setup.init.slice(a, b) if init is None else init, metrics=False,
                     conflicts=False, warm_start=warm_start, warm_sixd=warm_sixd, warm_schedule=warm_schedule,
                     settings=settings, ground=setup.terrain)
    # the source's bone and skinning transforms (and whatever else the clip's track holds) as views of the clip's
    track = setup.track.slice(a, b)
    return Retarget(setup.source, track.motion if setup.source.rig is None else source_motion.slice(a, b),
                    setup.target, w_opts, source_track=track)


class WindowedRetarget(Cancellable):
    """One retarget of a long clip as overlapping windows (see the module docstring): the same arguments, Steps
    and Outcome as ``core.pipeline.retarget.Retarget``, plus the ``WindowPlan``. Only the 'reconform' method has windows
    (copy-rotations is one pass over the clip already)."""

    def __init__(self, source, source_motion: Motion, target, options: RetargetOptions = None,
                 plan: WindowPlan = WindowPlan()):
        self.options = options or RetargetOptions()
        if self.options.method != "reconform":
            raise CoreError("Windows are for the 'reconform' method: copy-rotations runs over a whole clip at once.")
        if self.options.init_motion is not None or self.options.warm_start is not None:
            raise CoreError("A windowed retarget starts from copy-rotations: retarget the whole clip to re-solve.")
        if source_motion.num_frames < 1:
            raise CoreError(f"The source clip of '{source.name}' has no frames: pick a frame range with at least "
                            "one frame.")
        plan.check()
        self.plan = plan
        self.source, self.target = source, target
        self.source_motion = source_motion
        self._cancel = threading.Event()
        self.job = None
        self.outcome = None

    def steps(self):
        """Generator of Steps; returns the Outcome (also ``self.outcome``), or None when cancelled."""
        o, plan = self.options, self.plan
        t0 = time.perf_counter()
        setup = yield from clip_setup(self.source, self.source_motion, self.target, o, self._cancel)
        if setup is None:
            return None
        src, tgt, track, terrain, levels = setup.source, setup.target, setup.track, setup.terrain, setup.levels
        built, init, notes, timings = setup.built, setup.init, setup.notes, setup.timings
        fps, start = self.source_motion.fps, self.source_motion.frame_start

        # the windows, one Retarget each, stitched as they come
        t2 = time.perf_counter()
        ranges = plan.ranges(init.num_frames)
        rot, loc = init.rotations.copy(), init.locations.copy()
        a0, b0 = _PHASE_END["copy_rotations"], _PHASE_END["windows"]
        stats = {"windows": len(ranges), "window_frames": plan.length, "overlap_frames": plan.overlap,
                 "window_solve_s": []}
        prev = None                        # (start, stop) of the last window written into rot / loc
        for k, (a, b) in enumerate(ranges):
            w_init = init.slice(a, b)
            if prev is not None:           # start where the previous windows put the character (horizontally)
                here = hips_world(tgt, Motion(rot[a:a + 1], loc[a:a + 1], fps))[0]
                off = here - hips_world(tgt, w_init.slice(0, 1))[0]
                off[2] = 0.0
                w_init = shifted(tgt, w_init, off)
            self.job = job = window_job(setup, self.source_motion, o, a, b, w_init)
            lo = a0 + (b0 - a0) * k / len(ranges)
            hi = a0 + (b0 - a0) * (k + 1) / len(ranges)
            for s in job.steps():
                if self._cancel.is_set():
                    job.cancel()
                    return None
                if s.phase in ("solve", "copy_rotations"):
                    yield Step("solve", lo + (hi - lo) * s.fraction, f"Window {k + 1}/{len(ranges)} "
                               f"(frames {start + a}–{start + b - 1}): {s.message}", s.solver)
            if job.outcome is None or self._cancel.is_set():
                return None
            res = job.outcome.motion
            stats["window_solve_s"].append(job.outcome.timings.get("solve_s", 0.0))
            if prev is not None:           # each bone's quaternions on the stitched clip's side (sign-continuous)
                flip = np.where((rot[a] * res.rotations[0]).sum(-1) < 0.0, -1.0, 1.0)[:, None]
                res = Motion(res.rotations * flip, res.locations, fps, res.frame_start)
            if prev is None:
                rot[a:b], loc[a:b] = res.rotations, res.locations
            else:                          # crossfade over the frames both windows cover
                n = prev[1] - a
                if terrain is None:        # flat ground: align the horizontal path on the shared frames
                    d = hips_world(tgt, Motion(rot[a:a + n], loc[a:a + n], fps)) - hips_world(tgt, res.slice(0, n))
                    d = d.mean(0)
                    d[2] = 0.0
                    res = shifted(tgt, res, d)
                w = crossfade_weight(n)
                rot[a:a + n], loc[a:a + n] = blend(Motion(rot[a:a + n], loc[a:a + n], fps), res.slice(0, n), w)
                rot[a + n:b], loc[a + n:b] = res.rotations[n:], res.locations[n:]
            prev = (a, b)
            self.job = None
        motion = Motion(rot, loc, fps, start)
        timings["solve_s"] = time.perf_counter() - t2
        if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.locations).all()):
            raise CoreError(f"Retarget '{src.name}' -> '{tgt.name}' produced non-finite values; nothing written.")
        notes.append(f"retargeted in {len(ranges)} windows of {plan.length} frames sharing {plan.overlap} "
                     "(conflicts are not detected on a windowed retarget)")

        metrics = reference = None
        series = []
        if o.metrics and src.mesh is not None and tgt.mesh is not None and src.height and tgt.height:
            t3 = time.perf_counter()
            gen = measuring(src, track.motion, tgt, motion, init, o, levels, track, notes, terrain=terrain,
                            chunk=plan.length, series=series)   # a window's frames at a time: memory flat in length
            metrics, reference = yield from phase_steps(gen, "metrics", _PHASE_END["windows"],
                                                        _PHASE_END["metrics"], "Measuring the result and copy-rotations")
            timings["metrics_s"] = time.perf_counter() - t3
        timings["total_s"] = time.perf_counter() - t0
        report = None if terrain is None else getattr(terrain, "report", None)
        self.outcome = Outcome(o.method, motion, init, src, tgt, built, metrics, reference, [], notes, timings,
                               stats, levels, None, track, terrain, report, series)
        yield Step("done", 1.0, "Done")
        return self.outcome


def retarget_job(source, source_motion: Motion, target, options: RetargetOptions = None,
                 window: WindowPlan = None):
    """The retarget generator for a set-up: ``WindowedRetarget`` when ``window`` is given and the clip is longer
    than one window, else ``core.pipeline.retarget.Retarget`` (the panel, the batch command and the demo call this)."""
    options = options or RetargetOptions()
    if window is not None and options.method == "reconform" and source_motion.num_frames > window.length:
        return WindowedRetarget(source, source_motion, target, options, window)
    return Retarget(source, source_motion, target, options)
