"""One retarget, as a generator: the single path the panel, the batch command, the demo and the bench drive.

    job = Retarget(source_spec, source_motion, target_spec, RetargetOptions(method="reconform"))
    for step in job.steps():          # Step(phase, fraction, message, solver Progress or None)
        ...                           # job.cancel() from another thread stops it between steps
    outcome = job.outcome             # Outcome: motion, metrics of copy-rotations and of the solve, conflicts,
                                      # the key vertices used, notes, timings

Steps, in order (docs/architecture.md):
1. characters: each ``CharacterSpec`` is completed once (``core.character.build_character``: bone map, a fitted
   body for a skeleton-only source, h_c, stored or transferred key vertices, ReConForM §3.1);
2. the source track: the source clip evaluated once (``core.track.ClipTrack``), shared by every step below;
3. copy-rotations (``core.copy_rotations``): the baseline, and the solver's initial guess;
4. the solve (``core.solver``, ReConForM §3.2–4.2), one step per Adam iteration;
5. metrics of copy-rotations and of the result (``core.metrics``, ReConForM §5), read above the floor the
   solve used;
6. conflicts between terms (``core.conflicts``, ReConForM §6.3).
Nothing here touches Blender: the bridge reads the scene into specs and writes the outcome back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .advice import floor_advice
from .character import BuiltCharacter, CharacterSpec, build_character
from .conflicts import detect_conflicts
from .copy_rotations import copy_rotations
from .errors import CoreError
from .metrics import evaluate
from .solver import Progress, SolveJob, SolverSettings
from .track import ClipTrack
from .types import Character, Motion

METHODS = ("copy_rotations", "reconform")
#: share of the whole retarget's progress bar each phase ends at
_PHASE_END = {"characters": 0.08, "copy_rotations": 0.1, "solve": 0.9, "metrics": 0.97, "conflicts": 1.0}


@dataclass(frozen=True)
class RetargetOptions:
    """What to do (a frozen value: a set-up tuned in the panel gives the same result headless).

    Attributes:
        method: 'reconform' (key-vertex optimisation) or 'copy_rotations' (the baseline alone).
        keyvert_count: 41 or 96 key vertices ('reconform').
        settings: the solver's SolverSettings ('reconform').
        metrics: measure the result (needs a body on both characters).
        baseline_metrics: measure copy-rotations too, against the same source labels ('reconform').
        conflicts: detect conflicting terms after the solve ('reconform').
        init_motion: a copy-rotations result to reuse (a re-solve), else computed.
        warm_start: a previous result on the target to start the solve from (a re-solve: α held at 1,
            ``settings.resolve_fraction`` of the iterations).
    """

    method: str = "reconform"
    keyvert_count: int = 41
    settings: SolverSettings = field(default_factory=SolverSettings)
    metrics: bool = True
    baseline_metrics: bool = True
    conflicts: bool = True
    init_motion: Motion = None
    warm_start: Motion = None


class Step(NamedTuple):
    """Progress of a retarget: phase ('characters', 'copy_rotations', 'solve', 'metrics', 'conflicts'),
    fraction of the whole retarget in [0, 1], a line for the user, the solver's Progress during 'solve'."""

    phase: str
    fraction: float
    message: str
    solver: Progress = None


@dataclass
class Outcome:
    """What a retarget produced.

    Attributes:
        method: the method used.
        motion: the result on the target (a core.Motion of the target skeleton, the source's fps and frames).
        init_motion: copy-rotations' result (the baseline and the solver's start).
        source, target: the complete Characters used (key vertices included).
        built: {'source'|'target': BuiltCharacter} (rig type, fitted body, key-vertex origin, notes).
        metrics: core.metrics.evaluate of the result, or None; reference: copy-rotations' (None for the
            'copy_rotations' method, whose result is the reference).
        conflicts: core.conflicts.Conflict list (most severe first).
        notes: lines for the user; timings: seconds per phase; solver_stats: the solver's statistics.
        source_ground: the source's floor the solve and the metrics used (a level, or (T,) levels).
        job: the SolveJob ('reconform'), for conflicts and a warm-started re-solve.
        source_track: the source's ClipTrack (reused by a re-solve).
    """

    method: str
    motion: Motion
    init_motion: Motion
    source: Character
    target: Character
    built: dict
    metrics: dict = None
    reference: dict = None
    conflicts: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    solver_stats: dict = field(default_factory=dict)
    source_ground: object = 0.0
    job: SolveJob = None
    source_track: ClipTrack = None

    def keyverts_to_store(self) -> dict:
        """{'source'|'target': KeyVertexSet} of the characters whose key vertices this retarget transferred
        (a caller stores them on the character, where the viewport shows them and later runs reuse them)."""
        out = {}
        for role, b in self.built.items():
            if b.transferred and not b.fitted_body:
                out[role] = b.character.keyverts
        return out


def _as_built(c) -> BuiltCharacter:
    return c if isinstance(c, BuiltCharacter) else BuiltCharacter(c, "given", False, "stored" if c.keyverts else "")


def complete_character(c, role: str, options: RetargetOptions) -> BuiltCharacter:
    """Step 1 for one character: a CharacterSpec completed (``build_character``: a fitted body for a
    skeleton-only source, the key vertices the method needs), or a complete Character / BuiltCharacter as is."""
    if not isinstance(c, CharacterSpec):
        return _as_built(c)
    reconform = options.method == "reconform"
    kw = dict(fit_body=reconform) if role == "source" else dict(need_mesh=reconform)
    return build_character(c, keyvert_count=options.keyvert_count if reconform else 0, **kw)


def measure(source: Character, source_motion: Motion, target: Character, motion: Motion, init: Motion,
            options: RetargetOptions, ground, track: ClipTrack, notes: list) -> tuple:
    """Step 5: (metrics of ``motion``, metrics of copy-rotations' ``init`` or None), the source read above the
    floor ``ground`` the solve used; a floor advice line goes to ``notes``."""
    reconform = options.method == "reconform"
    terrain = options.settings.terrain if reconform else None
    metrics = evaluate(source, source_motion, target, motion, terrain, ground, source_track=track)
    reference = None
    if reconform and options.baseline_metrics:
        reference = evaluate(source, source_motion, target, init, terrain, ground, source_track=track)
    advice = floor_advice(metrics)
    if advice:
        notes.append(f"source '{source.name}': {advice}")
    return metrics, reference


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

        # 1. characters
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
        if track is None or track.character is not src or track.motion is not self.source_motion:
            track = ClipTrack(src, self.source_motion)

        # 2-3. copy-rotations (the source track's first use: its one forward-kinematics pass)
        t1 = time.perf_counter()
        yield Step("copy_rotations", _PHASE_END["characters"], "Copying rotations…")
        init = o.init_motion if o.init_motion is not None else copy_rotations(src, self.source_motion, tgt, track)
        init = Motion(init.rotations, init.locations, self.source_motion.fps, self.source_motion.frame_start)
        timings["copy_rotations_s"] = time.perf_counter() - t1
        if self._cancel.is_set():
            return None

        # 4. the solve
        motion, job, ground, stats = init, None, 0.0, {}
        if reconform:
            t2 = time.perf_counter()
            yield Step("solve", _PHASE_END["copy_rotations"], "Setting up the solver…")
            self.job = job = SolveJob(src, self.source_motion, tgt, init, o.settings, warm_start=o.warm_start,
                                      source_track=track)
            if self._cancel.is_set():
                job.cancel()
            a, b = _PHASE_END["copy_rotations"], _PHASE_END["solve"]
            for p in job.steps():
                yield Step("solve", a + (b - a) * p.fraction, f"Solving {p.step + 1}/{p.total}", p)
            if self._cancel.is_set() or not job.done:
                return None
            motion = job.result()
            motion = Motion(motion.rotations, motion.locations, self.source_motion.fps,
                            self.source_motion.frame_start)
            ground, stats = job.source_ground_level, job.metrics
            timings["solve_s"] = time.perf_counter() - t2
        if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.locations).all()):
            raise CoreError(f"Retarget '{src.name}' -> '{tgt.name}' produced non-finite values; nothing written.")

        # 5. metrics (the source's labels above the floor the solve used; the target's above its own)
        metrics = reference = None
        if o.metrics and src.mesh is not None and tgt.mesh is not None and src.height and tgt.height:
            t3 = time.perf_counter()
            yield Step("metrics", _PHASE_END["solve"], "Measuring the result…")
            metrics, reference = measure(src, self.source_motion, tgt, motion, init, o, ground, track, notes)
            timings["metrics_s"] = time.perf_counter() - t3
        elif o.metrics:
            notes.append("no metrics: " + ("the source has no body (skeleton only)" if src.mesh is None
                                           else "the target has no body"))

        # 6. conflicts (advice: a failure here never loses the result)
        conflicts = []
        if reconform and o.conflicts and not self._cancel.is_set():
            t4 = time.perf_counter()
            yield Step("conflicts", _PHASE_END["metrics"], "Looking for conflicting terms…")
            try:
                conflicts = detect_conflicts(job)
            except CoreError as ex:   # advice only: the result stands, the user is told why the list is empty
                notes.append(f"conflicts not measured: {ex}")
            timings["conflicts_s"] = time.perf_counter() - t4
        timings["total_s"] = time.perf_counter() - t0
        self.outcome = Outcome(o.method, motion, init, src, tgt, built, metrics, reference, conflicts, notes,
                               timings, stats, ground, job, track)
        yield Step("done", 1.0, "Done")
        return self.outcome


def run(job: Retarget, on_step=None) -> Outcome:
    """Drive ``job`` to the end on this thread (``on_step(step)`` sees each Step); returns its Outcome."""
    for step in job.steps():
        if on_step is not None:
            on_step(step)
    if job.outcome is None:
        raise CoreError("The retarget was cancelled: nothing was produced.")
    return job.outcome


__all__ = ["METHODS", "Cancellable", "CharacterSpec", "Outcome", "Retarget", "RetargetOptions", "Step", "complete_character",
           "measure", "run"]
