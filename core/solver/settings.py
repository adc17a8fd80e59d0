"""Every knob of the ReConForM solver (ReConForM §4.2) and what one step reports.

Defaults and the measurements behind them: docs/solver.md.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

from ..errors import CoreError
from ..rig.humanoid import LIMBS

#: Semantic terms (L_sem) and all terms, in reporting order.
SEMANTIC_TERMS = ("dist", "dir", "pen", "height", "sliding")
TERMS = ("reg", "smooth") + SEMANTIC_TERMS
#: the terms between the characters of a joint solve (their L_dist, L_dir and L_pen on key-vertex pairs of two
#: characters) under one name, for per-part weights (``part_weights[(part, "partner")]``) and the conflicts
PARTNER_TERM = "partner"
#: what ``SolverSettings.part_weights`` may name
PART_WEIGHT_TERMS = TERMS + (PARTNER_TERM,)
PRESETS = {
    "fast": dict(iterations=60, lr_rot=0.03, warmup=0.4),   # warm-up 24 steps: less overshoot (docs/solver.md)
    "balanced": dict(),
    "best": dict(iterations=300, lr_rot=0.015),
}


class WarmSchedule(NamedTuple):
    """How a warm-started re-solve runs: ``steps`` × ``iterations`` Adam steps at ``lr`` × the learning rates (α
    held at 1). The caller of a re-solve picks it: with a new optimiser ``SolveJob(warm_schedule=...)`` (a slider's
    re-solve ``RESOLVE``, a Live window ``core.pipeline.live.WARM``), continuing the last solve's
    ``SolveJob(continue_schedule=...)`` (``CONTINUE``; the panel's Re-solve Iterations)."""

    steps: float
    lr: float


#: a re-solve from the last result with a new optimiser: 30 % of the steps at 30 % of the rates (at full rates a
#: fresh Adam's first steps throw the result off its optimum; docs/solver.md "Re-solve")
RESOLVE = WarmSchedule(steps=0.3, lr=0.3)
#: a re-solve that continues the last solve's optimiser (its moments set the step size): 5 % of the steps at full
#: rates (docs/solver.md "Re-solve")
CONTINUE = WarmSchedule(steps=0.05, lr=1.0)


@dataclass
class SolverSettings:
    """The solver's options a user sets: in the panel (Quality and its advanced fields, Device, Source Floor, the
    conflict sliders' per-part weights), in a batch set-up file's ``"settings"`` (docs/bridge.md), or through the
    quality preset (``PRESETS``); the product's own callers set the threads. A re-solve's schedule is the
    re-solve's own argument (``WarmSchedule``), the target's terrain the solve's input (``SolveJob(terrain=...)``).
    Every other choice of the solver is a named constant in the module that uses it (an experiment patches it:
    ``tools/bench/run.py --const core.solver.MODULE.NAME=VALUE``). Defaults and the measurements behind them:
    docs/solver.md.

    Weights multiply terms that are first divided by their reference scale (docs/solver.md "Balancing"), so
    a weight of 1 means "as important as at the start of the solve".
    """

    w_reg: float = 0.3          #: key vertices stay near the copy-rotations result
    w_smooth: float = 0.5       #: jerk of key vertices (non-squared, as printed)
    #: each point's (key vertices, sole points, body points) jerk summed over windows of a second, beyond
    #: copy-rotations' and the source's there, in L_smooth × this (0: off; docs/solver.md "Jerk")
    jerk_budget: float = 40.0
    w_sem: float = 1.0          #: multiplies the five semantic terms below
    w_dist: float = 2.0         #: the source's contacts kept, its close pairs matched closer (docs/solver.md)
    w_dir: float = 1.0
    w_pen: float = 0.5          #: the self barrier keeps limbs out; at 1 L_pen costs contacts (docs/solver.md)
    w_height: float = 1.0       #: includes the unweighted floor barrier
    w_sliding: float = 5.0      #: measured: mean foot-locked F1 0.32 -> 0.37 over the bench cases
    w_partner: float = 1.0      #: a joint solve: multiplies dist, dir and pen between characters
    w_gaze: float = 1.0         #: a joint solve: multiplies the gaze term on eye -> partner pairs in the gaze cone
    w_barrier: float = 1.0      #: a joint solve: a body deeper inside the partner's than in the source (barrier.py)
    #: a limb deeper in its own body than the source's or copy-rotations' (capsules and the surface; docs/solver.md)
    w_self_barrier: float = 5.0
    #: the head turned more than HEAD_TOLERANCE_DEG from copy-rotations' (``head.py``; reported in L_reg; 0: off)
    w_head: float = 3.0
    #: L_dist also keeps each pair on the source's side of d_min (in contact or apart), as far from it as the
    #: source is, up to ``objective.CONTACT_MARGIN`` of d_min: × this, on L_dist's scale
    #: (``losses.contact_state_loss``, docs/solver.md "Pair terms: the contact state"). 0: off
    contact_state: float = 1000.0
    foot_lock: float = 2.0           #: where the source foot is locked, the target's sole must not slide (0: off)
    #: where the source foot is grounded, its lowest sole point held at the source foot's height (instead of that
    #: foot's raw key-vertex heights): × this, beside L_height on the floor barrier's scale (docs/solver.md "Foot
    #: contact"). 0: off, the raw key-vertex heights are matched as the paper does
    foot_contact_weight: float = 2.0
    iterations: int = 120       #: Adam steps of a first solve
    lr_rot: float = 0.02        #: Adam step on the 6D rotation residual (≈ radians)
    lr_root: float = 0.01       #: Adam step on the root offset, in units of the target's height h_c
    warmup: float = 0.1         #: share of the steps over which the learning rates ramp up linearly
    #: the source's floor: "auto" (its own: z = 0 where it stands on it, else tracked; docs/metrics.md "Whose
    #: floor"), "zero" (z = 0), "estimate" (one level from its lowest foot contacts), "track" (one level per
    #: frame, following a drift), metres, or a (T,) sequence of metres (core.contacts.ground)
    source_ground: object = "auto"
    #: {(body part, term): factor} per-part overrides (``part_weights_from``); term one of PART_WEIGHT_TERMS
    #: ("partner": the terms between the characters of a joint solve at that part's key vertices; a part's own
    #: dist / dir / pen factors act on its own pairs only)
    part_weights: dict = field(default_factory=dict)
    device: str = "cpu"              #: "cpu", or "cuda" on request
    #: on the CPU, the pose map and its dense terms compiled by torch.compile (needs a C++ compiler; the first
    #: solve of each clip length in a process pays the compilation; falls back to eager; docs/solver.md)
    compile: bool = False
    num_threads: int = None          #: torch intra-op threads (None: leave torch's setting)

    @classmethod
    def preset(cls, name: str = "balanced", **overrides) -> "SolverSettings":
        """Quality presets 'fast', 'balanced' (default) and 'best'; keyword overrides win."""
        if name not in PRESETS:
            raise CoreError(f"Unknown quality preset '{name}': use one of {', '.join(PRESETS)}.")
        unknown = sorted(set(overrides) - {f.name for f in fields(cls)})
        if unknown:
            raise CoreError(f"Unknown solver setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: use "
                            f"{', '.join(f.name for f in fields(cls))} (the solver's other choices are constants of "
                            "its modules: docs/solver.md).")
        return replace(cls(), **{**PRESETS[name], **overrides})

    def num_steps(self, warm: bool = False, schedule: WarmSchedule = RESOLVE) -> int:
        """Adam steps of a solve: ``iterations``, or for a warm-started re-solve ``schedule.steps`` of them."""
        if not warm:
            return max(1, int(self.iterations))
        return max(1, math.ceil(self.iterations * schedule.steps))

    def weight(self, term: str) -> float:
        w = getattr(self, f"w_{term}")
        return w * self.w_sem if term in SEMANTIC_TERMS else w

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def part_weights_from(mapping) -> dict:
    """``SolverSettings.part_weights`` from {(body part, term): factor} or its JSON form {body part: {term:
    factor}} (a batch set-up file), checked: parts from ``core.rig.humanoid.LIMBS``, terms from PART_WEIGHT_TERMS,
    factors ≥ 0."""
    out = {}
    for key, value in dict(mapping or {}).items():
        items = [((key[0], key[1]), value)] if isinstance(key, tuple) else \
            [((key, term), f) for term, f in (value.items() if isinstance(value, dict) else [(None, value)])]
        for (part, term), factor in items:
            if part not in LIMBS:
                raise CoreError(f"Per-part weights: unknown body part '{part}'; use one of {', '.join(LIMBS)}.")
            if term not in PART_WEIGHT_TERMS:
                raise CoreError(f"Per-part weights of '{part}': give {{term: factor}} with a term among "
                                f"{', '.join(PART_WEIGHT_TERMS)}, not {term!r}.")
            try:
                factor = float(factor)
            except (TypeError, ValueError):
                factor = -1.0
            if not factor >= 0.0:
                raise CoreError(f"Per-part weight of '{part}' / '{term}' must be a number ≥ 0.")
            out[(part, term)] = factor
    return out


class Progress(NamedTuple):
    """One solver step: fraction done in (0, 1], step index, total steps, total loss, {term: weighted value},
    and ``relative``: the loss over copy-rotations' loss at the same α (docs/solver.md "Reading the progress":
    1 at the start, lower is better; the raw loss is not comparable across steps because α changes the terms)."""

    fraction: float
    step: int
    total: int
    loss: float
    terms: dict
    relative: float = float("nan")
