"""One retarget, as a generator: the single path the panel, the batch command, the demo and the bench drive.

    job = Retarget(source_spec, source_motion, target_spec, RetargetOptions(method="reconform"))
    for step in job.steps():          # Step(phase, fraction, message, solver Progress or None)
        ...                           # job.cancel() from another thread stops it between steps
    outcome = job.outcome             # Outcome: motion, metrics of copy-rotations and of the solve, conflicts,
                                      # the key vertices used, notes, timings

Steps, in order (docs/architecture.md):
1. characters: each ``CharacterSpec`` is completed once (``core.character.complete.build_character``: bone map, a fitted
   body for a skeleton-only source, h_c, stored or transferred key vertices, ReConForM §3.1);
2. the source track: the source clip evaluated once (``core.character.track.ClipTrack``), shared by every step below;
3. copy-rotations (``core.pipeline.copy_rotations``): the baseline, and the solver's initial guess; with a ground
   object (``RetargetOptions.ground``, ReConForM §6.2), its height field is sampled over the region the
   target's feet reach in copy-rotations (``core.contacts.terrain.sample_ground``) and copy-rotations starts on it;
4. the solve (``core.solver``, ReConForM §3.2–4.2), one step per Adam iteration;
5. metrics of copy-rotations and of the result (``core.metrics.scores``, ReConForM §5), the source read above the
   floor the solve used, the target above its terrain;
6. conflicts between terms (``core.solver.conflicts``, ReConForM §6.3).
Nothing here touches Blender: the bridge reads the scene into specs and writes the outcome back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np

from ..metrics.advice import floor_advice
from ..character.complete import BuiltCharacter, CharacterSpec, build_character, check_character
from ..solver.conflicts import detecting
from .copy_rotations import copy_rotations, posture_note
from .options import METHODS, Outcome, RetargetOptions, Step, scene_channels
from ..errors import CoreError
from ..heap import release_free_memory
from ..metrics.scores import evaluations
from ..progress import drive
from ..solver.continued import solve_job
from ..solver.head import head_turn
from ..contacts.terrain import GroundSurface, HeightField, check_covers, clip_footprint, sample_ground
from ..character.track import ClipTrack
from ..types import Character, Motion

#: the region a ground object is sampled over: copy-rotations' hips and feet, grown by this share of the
#: target's height plus this share of the path's extent (the solve moves the root; docs/solver.md "Terrain")
FOOTPRINT_MARGIN, FOOTPRINT_PATH_MARGIN = 0.3, 0.1
#: share of the whole retarget's progress bar each phase ends at
_PHASE_END = {"characters": 0.08, "copy_rotations": 0.1, "solve": 0.9, "metrics": 0.97, "conflicts": 1.0}
#: a phase that reports its own progress (the metrics' whole-mesh passes) yields a Step at most this often
_REPORT_S = 0.5


def _as_built(c) -> BuiltCharacter:
    return c if isinstance(c, BuiltCharacter) else BuiltCharacter(c, "given", False, "stored" if c.keyverts else "")


def check_spec(c, role: str, options: RetargetOptions):
    """The milliseconds check of a CharacterSpec ('Source' or 'Target' ``role``) before any slow work
    (``core.character.complete.check_character``); a complete Character passes as is."""
    if isinstance(c, CharacterSpec):
        reconform = options.method == "reconform"
        kw = {} if role == "Source" else dict(need_mesh=reconform, need_standing=True)
        check_character(c, keyvert_count=options.keyvert_count if reconform else 0, role=role, **kw)


def complete_character(c, role: str, options: RetargetOptions) -> BuiltCharacter:
    """Step 1 for one character: a CharacterSpec completed (``build_character``: a fitted body for a
    skeleton-only source, giving key vertices for the solve and a surface for the metrics; the key vertices the
    method needs; a target lying at rest refused), or a complete Character / BuiltCharacter as is."""
    if not isinstance(c, CharacterSpec):
        return _as_built(c)
    reconform = options.method == "reconform"
    kw = (dict(fit_body=reconform or options.metrics) if role == "source"
          else dict(need_mesh=reconform, need_standing=True))
    return build_character(c, keyvert_count=options.keyvert_count if reconform else 0, **kw)


def measuring(source: Character, source_motion: Motion, target: Character, motion: Motion, init: Motion,
              options: RetargetOptions, ground, track: ClipTrack, notes: list, *, terrain=None,
              target_track: ClipTrack = None, chunk: int = None, series: list = None):
    """Step 5 as a generator of progress shares (the whole-mesh passes); returns (metrics of ``motion``, metrics
    of copy-rotations' ``init`` or None): the source read above the floor ``ground`` the solve used (measured once
    for both), the target above ``terrain`` (a HeightField, None: z = 0), ``chunk`` frames at a time (None: whole,
    ``core.metrics.scores.evaluations``); a floor advice line goes to ``notes``. ``series``: a list that receives
    the per-frame mesh series of the result, then of copy-rotations' when measured (``evaluations``' own)."""
    both = options.method == "reconform" and options.baseline_metrics
    motions = [motion, init] if both else [motion]
    # the result's track is handed on and let go once measured, before copy-rotations' is built (a long clip's foot
    # points are large)
    gen = evaluations(source, source_motion, target, motions, terrain, ground, source_track=track,
                      target_tracks=[target_track] + [None] * (len(motions) - 1), chunk=chunk, series=series)
    target_track = None
    out = yield from gen
    metrics, reference = out[0], (out[1] if both else None)
    turn = head_turn(target, motion, init) if init is not None and options.method == "reconform" else None
    if turn is not None:      # how far the solve turned the head from copy-rotations' (docs/metrics.md)
        metrics.update(head_turn_mean=float(turn.mean()), head_turn_max=float(turn.max()))
        if reference is not None:
            reference.update(head_turn_mean=0.0, head_turn_max=0.0)
    advice = floor_advice(metrics)
    if advice:
        notes.append(f"source '{source.name}': {advice}")
    return metrics, reference


def measure(*args, **kwargs) -> tuple:
    """``measuring`` run to its end: (metrics, reference)."""
    return drive(measuring(*args, **kwargs))


class Cancellable:
    """A retarget generator's cancel and state: ``cancel()`` from another thread stops it between steps (and the
    solve in flight, ``job``); ``outcome`` is set once it has produced one. Subclasses set ``_cancel``."""

    job = None
    outcome = None

    def cancel(self):
        """Stop before the next step (thread-safe); the generator then ends without an outcome."""
        self._cancel.set()
        if self.job is not None:
            self.job.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        """True once the generator has produced its outcome."""
        return self.outcome is not None


class Retarget(Cancellable):
    """One retarget of ``source_motion`` from ``source`` onto ``target`` (see the module docstring).

    Args:
        source, target: CharacterSpec (completed in the first step), or an already complete Character /
            BuiltCharacter (a re-solve reuses the last ones).
        source_motion: the source clip (a Motion of the source skeleton; never modified).
        options: RetargetOptions.
        source_track: the source clip's ClipTrack when the caller has one (a re-solve).
    """

    def __init__(self, source, source_motion: Motion, target, options: RetargetOptions = None,
                 source_track: ClipTrack = None):
        self.options = options or RetargetOptions()
        if self.options.method not in METHODS:
            raise CoreError(f"Unknown method '{self.options.method}': use one of {', '.join(METHODS)}.")
        if source_motion.num_frames < 1:
            raise CoreError(f"The source clip of '{source.name}' has no frames: pick a frame range with at least "
                            "one frame.")
        self.source, self.target = source, target
        self.source_motion = source_motion
        self.source_track = source_track
        self._cancel = threading.Event()
        self.job = None
        self.outcome = None

    def steps(self):
        """Generator of Steps; returns the Outcome (also kept as ``self.outcome``), or None when cancelled."""
        o = self.options
        reconform = o.method == "reconform"
        timings, notes = {}, []
        t0 = time.perf_counter()

        # 1. characters: both checked first (milliseconds), then completed (seconds: the key-vertex transfer)
        for role, c in (("Source", self.source), ("Target", self.target)):
            check_spec(c, role, o)
        built = {}
        for role, c in (("source", self.source), ("target", self.target)):
            if isinstance(c, CharacterSpec):
                yield Step("characters", _PHASE_END["characters"] * (0.2 if role == "source" else 0.6),
                           f"Preparing {role} '{c.name}'…")
            b = complete_character(c, role, o)
            if self._cancel.is_set():
                return None
            built[role] = b
            notes.extend(b.notes)
        src, tgt = built["source"].character, built["target"].character
        timings["characters_s"] = time.perf_counter() - t0
        track = self.source_track
        if track is None or track.character is not src or (src.rig is None
                                                            and track.motion is not self.source_motion):
            # the clip in the channels of the skeleton the core works on (core.rig.rehang: re-hung limb ends)
            track = ClipTrack(src, self.source_motion if src.rig is None else src.rig.to_core(self.source_motion))
        source_motion = track.motion

        # 2-3. copy-rotations (the source track's first use: its one forward-kinematics pass)
        t1 = time.perf_counter()
        yield Step("copy_rotations", _PHASE_END["characters"], "Copying rotations…")
        terrain, floor = o.ground, o.settings.source_ground
        init, flat = o.init_motion, None
        if isinstance(terrain, GroundSurface):   # sampled where copy-rotations puts the target's feet
            yield Step("copy_rotations", _PHASE_END["characters"], f"Sampling the ground '{terrain.name}'…")
            flat = init if init is not None else copy_rotations(src, source_motion, tgt, track, source_ground=floor)
            terrain = clip_terrain(terrain, tgt, flat)
            notes.append(f"ground {terrain.report.line()}")
        if init is None:   # on the terrain at frame 0: the baseline, and the solve's start (the flat pass re-stood)
            init = copy_rotations(src, source_motion, tgt, track, 0.0 if terrain is None else terrain, floor, like=flat)
        init = Motion(init.rotations, init.locations, source_motion.fps, source_motion.frame_start)
        posture = posture_note(track, tgt, init)
        if posture:
            notes.append(posture)
        timings["copy_rotations_s"] = time.perf_counter() - t1
        if self._cancel.is_set():
            return None

        # 4. the solve
        motion, job, ground, stats = init, None, 0.0, {}
        long_clip = source_motion.num_frames >= TRIM_FRAMES   # hands its freed heap back as it goes (core.heap)
        if reconform:
            t2 = time.perf_counter()
            yield Step("solve", _PHASE_END["copy_rotations"], "Setting up the solver…")
            self.job = job = solve_job(src, source_motion, tgt, init, o.settings, track, o.warm_start, o.warm_sixd,
                                       o.warm_state, o.warm_job, o.warm_schedule, o.continue_schedule, terrain)
            for line in job.prepare():
                if self._cancel.is_set():
                    job.cancel()
                    return None
                yield Step("solve", _PHASE_END["copy_rotations"], f"Setting up the solver: {line}…")
            if self._cancel.is_set():
                job.cancel()
            a, b = _PHASE_END["copy_rotations"], _PHASE_END["solve"]
            yield Step("solve", a, f"Solving 0/{job.total}: the first step…")   # set-up done: a line before step 1
            for p in job.steps():     # the objective relative to copy-rotations' at the same α (docs/solver.md)
                if long_clip and p.step % TRIM_STEPS == 0:
                    release_free_memory()                   # a long solve's freed temporaries (core.heap)
                yield Step("solve", a + (b - a) * p.fraction,
                           f"Solving {p.step + 1}/{p.total}: objective {100 * p.relative:.0f} % of copy-rotations'",
                           p)
            if self._cancel.is_set() or not job.done:
                return None
            motion = job.result()
            motion = Motion(motion.rotations, motion.locations, source_motion.fps,
                            source_motion.frame_start)
            ground, stats = job.source_ground_level, job.metrics
            timings["solve_s"] = time.perf_counter() - t2
        if long_clip:   # before the metrics: the barrier's candidates (searched again for the conflicts), freed heap
            if job is not None and job.own_barrier is not None:
                job.own_barrier.release()
            release_free_memory()
        if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.locations).all()):
            raise CoreError(f"Retarget '{src.name}' -> '{tgt.name}' produced non-finite values; nothing written.")

        # 5. the ground's report, then the metrics (the source's labels above the floor the solve used; the
        # target's above its own). The result's ClipTrack is built once and handed on, not kept: on a long clip its
        # foot points are hundreds of MB, and copy-rotations' track is built while the metrics run
        report = None if terrain is None else getattr(terrain, "report", None)
        result_track = ClipTrack(tgt, motion)
        if report is not None and tgt.mesh is not None:   # where the field clamps, heights are the border's
            report = replace(report, outside_frames=terrain.frames_outside(result_track))
            if report.outside_frames:
                notes.append(f"ground '{report.name}': the result's feet leave the sampled region on "
                             f"{report.outside_frames} frames (heights there are the border's)")
        metrics = reference = None
        series = []
        if o.metrics and src.mesh is not None and tgt.mesh is not None and src.height and tgt.height:
            t3 = time.perf_counter()
            gen = measuring(src, source_motion, tgt, motion, init, o, ground, track, notes, terrain=terrain,
                            target_track=result_track, series=series)
            result_track = None
            metrics, reference = yield from phase_steps(
                gen, "metrics", _PHASE_END["solve"], _PHASE_END["metrics"],
                "Measuring the result" + (" and copy-rotations" if reconform and o.baseline_metrics else ""))
            timings["metrics_s"] = time.perf_counter() - t3
            if long_clip:
                release_free_memory()
        elif o.metrics:
            notes.append("no metrics: " + ("the source has no body (skeleton only)" if src.mesh is None
                                           else "the target has no body"))
        result_track = None

        # 6. conflicts (advice: a failure here never loses the result)
        conflicts = []
        if reconform and o.conflicts and not self._cancel.is_set():
            t4 = time.perf_counter()
            try:
                conflicts = yield from phase_steps(detecting(job), "conflicts", _PHASE_END["metrics"],
                                                 _PHASE_END["conflicts"], "Looking for conflicting terms")
            except CoreError as ex:   # advice only: the result stands, the user is told why the list is empty
                notes.append(f"conflicts not measured: {ex}")
            timings["conflicts_s"] = time.perf_counter() - t4
        timings["total_s"] = time.perf_counter() - t0
        self.outcome = Outcome(o.method, motion, init, src, tgt, built, metrics, reference, conflicts, notes,
                               timings, stats, ground, job, track, terrain, report, series)
        yield Step("done", 1.0, "Done")
        return self.outcome


#: a retarget of at least this many frames hands its freed heap back after the solve and the metrics, and every
#: TRIM_STEPS steps of the solve (core.heap); a short one's temporaries are small and Live's windows need no trim
TRIM_FRAMES = 2000
TRIM_STEPS = 5


def phase_steps(gen, phase: str, a: float, b: float, message: str):
    """Steps of ``phase`` from a generator of fractions in [0, 1] (mapped onto [a, b] of the whole retarget), one
    at least every ``_REPORT_S`` seconds and at the start; returns the generator's value."""
    yield Step(phase, a, f"{message}…")
    last = time.perf_counter()
    while True:
        try:
            f = next(gen)
        except StopIteration as done:
            return done.value
        if time.perf_counter() - last >= _REPORT_S:
            last = time.perf_counter()
            yield Step(phase, a + (b - a) * f, f"{message}: {100 * f:.0f} %")


def clip_terrain(surface: GroundSurface, target: Character, init: Motion) -> HeightField:
    """The HeightField of a ground object over the region the target's feet reach in ``init`` (copy-rotations):
    the bounding box of its hips and feet, grown by FOOTPRINT_MARGIN × h_c + FOOTPRINT_PATH_MARGIN × the path's
    extent. Raises a CoreError naming the ground when the hips leave the object's extent."""
    track = ClipTrack(target, init)
    hips = track.world_positions[:, target.skeleton.index(target.bone_map["hips"]), :2]     # (T, 2)
    check_covers(surface, hips, tol=(surface.spacing or 0.0))
    feet = [p[..., :2] for p in track.foot_points if p.shape[1]] if target.mesh is not None else []
    feet = np.concatenate(feet, 1) if feet else hips[:, None]                                # (T, F, 2)
    h = float(target.height) if target.height else float(np.ptp(track.world_positions[..., 2]))
    margin = FOOTPRINT_MARGIN * h + FOOTPRINT_PATH_MARGIN * float(np.ptp(hips, axis=0).max())
    region = clip_footprint(np.concatenate([hips, feet.reshape(-1, 2)]), margin)
    field, _ = sample_ground(surface, region, probes=feet)
    return field


def run(job: Retarget, on_step=None) -> Outcome:
    """Drive ``job`` to the end on this thread (``on_step(step)`` sees each Step); returns its Outcome."""
    for step in job.steps():
        if on_step is not None:
            on_step(step)
    if job.outcome is None:
        raise CoreError("The retarget was cancelled: nothing was produced.")
    return job.outcome


__all__ = ["METHODS", "Cancellable", "CharacterSpec", "Outcome", "Retarget", "RetargetOptions", "Step",
           "check_spec", "clip_terrain", "complete_character", "measure", "measuring", "phase_steps",
           "run", "scene_channels"]
