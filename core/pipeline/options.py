"""What one retarget takes and gives (``core.pipeline.retarget``): its options, the steps it yields and its outcome,
and the result in the scene's channels. Plain data: the generator that fills them is ``core.pipeline.retarget``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..character.track import ClipTrack
from ..contacts.terrain import HeightField
from ..solver import CONTINUE, RESOLVE, Progress, SolveJob, SolverSettings, WarmSchedule
from ..types import Character, Motion

METHODS = ("copy_rotations", "reconform")


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
        warm_start: a previous result on the target to start the solve from (a re-solve: α held at 1).
        warm_sixd, warm_state, warm_job: optional, ``warm_start``'s solve's 6D rotations (``SolveJob.result_sixd``:
            an exact start), optimiser (``SolveJob.optim``: continued; docs/solver.md "Use") and SolveJob (its set-up
            reused where only weights differ: ``core.solver.continued``).
        warm_schedule: a re-solve with a new optimiser: its share of the steps and of the learning rates
            (``core.solver.WarmSchedule``; default ``core.solver.RESOLVE``).
        continue_schedule: a re-solve continuing ``warm_state``: its share of the steps (and rates; default
            ``core.solver.CONTINUE``; the panel's Re-solve Iterations).
        ground: the target's ground (ReConForM §6.2): None (z = 0), a ``core.contacts.terrain.GroundSurface`` (a
            ground object's triangles: sampled over the clip's footprint), or a ``core.contacts.terrain.HeightField``
            or any differentiable f(x, y) (used as it is: a re-solve reuses the first solve's).
    """

    method: str = "reconform"
    keyvert_count: int = 41
    settings: SolverSettings = field(default_factory=SolverSettings)
    metrics: bool = True
    baseline_metrics: bool = True
    conflicts: bool = True
    init_motion: Motion = None
    warm_start: Motion = None
    warm_sixd: object = None
    warm_state: object = None
    warm_job: object = None
    warm_schedule: WarmSchedule = RESOLVE
    continue_schedule: WarmSchedule = CONTINUE
    ground: object = None


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
        metrics: core.metrics.scores.evaluate of the result, or None; reference: copy-rotations' (None for the
            'copy_rotations' method, whose result is the reference).
        conflicts: core.solver.conflicts.Conflict list (most severe first).
        notes: lines for the user; timings: seconds per phase; solver_stats: the solver's statistics.
        source_ground: the source's floor the solve and the metrics used (a level, or (T,) levels).
        job: the SolveJob ('reconform'), for conflicts and a warm-started re-solve.
        source_track: the source's ClipTrack (reused by a re-solve).
        terrain: the target's HeightField (None: z = 0); ground: its ``core.contacts.terrain.TerrainReport`` (how a
            ground object was sampled, and on how many frames the result's feet left the sampled region).
        series: the metrics' per-frame mesh series, {'mesh_pen': (T,), 'contact_depth': (T,)} of the result, then of
            copy-rotations' when ``reference`` is measured (``core.metrics.scores.evaluations``; empty without
            metrics, and in a group's member outcomes): the frames behind ``mesh_pen_max`` and ``contact_depth_p*``
            (the bench's worst frames).
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
    terrain: HeightField = None
    ground: object = None
    series: list = field(default_factory=list)

    def for_scene(self, motion: Motion = None) -> tuple:
        """(the target's skeleton as the scene has it, ``motion`` (default: the result) in its channels): what a
        caller writes as an Action. Differs from (``target.skeleton``, the core's channels) only on a rig whose
        limb ends the core re-hung (``core.rig.rehang``)."""
        return scene_channels(self.target, self.motion if motion is None else motion)

    def keyverts_to_store(self) -> dict:
        """{'source'|'target': KeyVertexSet} of the characters whose key vertices this retarget transferred
        (a caller stores them on the character, where the viewport shows them and later runs reuse them)."""
        out = {}
        for role, b in self.built.items():
            if b.transferred and not b.fitted_body:
                out[role] = b.character.keyverts
        return out


def scene_channels(target: Character, motion: Motion) -> tuple:
    """(``target``'s skeleton as the scene has it, ``motion`` of the core's channels in its channels): the two
    differ only on a rig whose limb ends the core re-hung (``core.rig.rehang``)."""
    rig = target.rig
    return (target.skeleton, motion) if rig is None else (rig.rig, rig.to_rig(motion))
