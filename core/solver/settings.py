"""Every knob of the ReConForM solver (ReConForM §4.2) and what one step reports.

Defaults and the measurements behind them: docs/solver.md.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

import torch

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
#: a source foot whose lowest point is within CONTACT_MIN of h_c of its ground is in contact (weight 1),
#: fading to 0 at CONTACT_MAX (twice the grounded band of docs/metrics.md, 1 %: docs/solver.md "Foot contact")
CONTACT_MIN, CONTACT_MAX = 0.02, 0.04
#: a source foot whose lowest point moves slower than LOCK_MIN of h_c per second (over core.contacts.feet.LOCK_WINDOW_S,
#: as the foot-locked metric of docs/metrics.md) is locked (weight 1), fading to 0 at LOCK_MAX
LOCK_MIN, LOCK_MAX = 0.005, 0.01
PRESETS = {
    "fast": dict(iterations=60, lr_rot=0.03, warmup=0.4),   # warm-up 24 steps: less overshoot (docs/solver.md)
    "balanced": dict(),
    "best": dict(iterations=300, lr_rot=0.015),
}


@dataclass
class SolverSettings:
    """Every knob of the solver. Defaults and the measurements behind them: docs/solver.md.

    Weights multiply terms that are first divided by their reference scale (docs/solver.md "Balancing"), so
    a weight of 1 means "as important as at the start of the solve".
    """

    w_reg: float = 0.3          #: key vertices stay near the copy-rotations result
    w_smooth: float = 0.5       #: jerk of key vertices (non-squared, as printed)
    smooth_soles: float = 1.0   #: the sole points' added jerk in L_smooth beside the key vertices', times this
    #: the body points' (the capsules' ends, at the joints) added jerk in L_smooth beside the key vertices', × this
    #: (an option: docs/solver.md "Issue 11 item 1, jerk: the joints in L_smooth, again")
    smooth_joints: float = 0.0
    smooth_root: float = 3.0    #: the hips' added jerk in L_smooth, × this, once per key vertex and sole point
    #: each point's (key vertices, sole points, body points) jerk summed over windows of ``jerk_budget_s``,
    #: beyond copy-rotations' sum there, in L_smooth × this (docs/solver.md "Issue 11 item 1, jerk: a budget")
    jerk_budget: float = 2.0
    jerk_budget_s: float = 1.0
    #: the key vertices' and body points' budgets are also at most the source's own jerk there, × h_tgt / h_src
    jerk_budget_source: bool = True
    w_sem: float = 1.0          #: multiplies the five semantic terms below
    w_dist: float = 2.0         #: with contact_focus: the source's contacts kept (docs/solver.md "Pair terms")
    w_dir: float = 1.0
    w_pen: float = 0.5          #: the self barrier keeps limbs out; at 1 L_pen costs contacts (docs/solver.md)
    w_height: float = 1.0       #: includes the unweighted floor barrier
    w_sliding: float = 5.0      #: measured: mean foot-locked F1 0.32 -> 0.37 over the bench cases
    w_partner: float = 1.0      #: a joint solve: multiplies dist, dir and pen between characters
    w_gaze: float = 1.0         #: a joint solve: multiplies the gaze term on eye -> partner pairs in the gaze cone
    #: the gaze term: "look" keeps the angle between each character's gaze and its eye → partner direction, by
    #: turning its head; "direction": the paper's L_dir on the eye → partner direction itself (docs/solver.md "Gaze")
    gaze_term: str = "look"
    w_barrier: float = 1.0      #: a joint solve: a body deeper inside the partner's than in the source (barrier.py)
    w_self_barrier: float = 1.0  #: a limb deeper in its own body than the source's or copy-rotations' (docs/solver.md)
    #: the head turned more than HEAD_TOLERANCE_DEG from copy-rotations' (``head.py``; reported in L_reg; 0: off)
    w_head: float = 3.0
    partner_lift: bool = True   #: a joint solve: the terms between characters may move a root up or down
    iterations: int = 120       #: Adam steps of a first solve
    lr_rot: float = 0.02        #: Adam step on the 6D rotation residual (≈ radians)
    lr_root: float = 0.01       #: Adam step on the root offset, in units of the target's height h_c
    adam_eps: float = 1e-3      #: Adam ε on gradients of the loss × number of control points (damps noise)
    warmup: float = 0.1         #: share of the steps over which the learning rates ramp up linearly
    lr_final: float = 0.1       #: the learning rate decays (cosine) to this fraction at the last step
    alpha_end: float = 1.0      #: share of the steps at which α (the target's adaptive weights) reaches 1
    #: "added": the key vertices' jerk added to the initial motion's; "source": added to the source's own (× h_tgt /
    #: h_src; the sole points' still to the initial motion's); "absolute": the jerk itself (docs/solver.md)
    smooth_mode: str = "added"
    knot_spacing: float = 0.1   #: seconds between B-spline control points of the residual (0: per frame)
    #: around the source feet's events (landing, lift-off, a lock's start and end) the knot spans are halved where
    #: a half keeps at least this many seconds (0: a uniform grid; docs/solver.md "Knots at the feet's events")
    event_knots: float = 0.05
    #: seconds between control points of the residual of the bones that move the head and the shoulders (the neck,
    #: head, collarbones and the bone the neck hangs from), never under 3 frames: on a high-frame-rate capture
    #: they can take out the jitter copy-rotations carries there (0: the main grid; docs/solver.md "The upper
    #: body's knots"). At 30 fps its 3 frames are the main grid's: nothing changes
    upper_knots: float = 0.025
    exclude_same_limb: bool = True
    clamp_source_height: bool = True  #: L_height matches source heights below the floor at 0
    sliding_window_s: float = 0.0    #: L_sliding's W_floor averaged over this many seconds (0: per frame)
    sliding_floor: float = 0.1       #: floor of L_sliding's reference scale, in h_c / s of sliding
    sole_points: int = 24            #: per foot, mesh sole points under the floor barrier (0: key vertices only)
    root_init: str = "feet"          #: "feet": start the root where planted feet stay put; "copy": copy-rot's
    reg_free_root_xy: bool = True    #: L_reg ignores the horizontal root offset (docs/solver.md)
    scale_floor_terms: bool = True   #: compare heights / foot velocities scaled by h_tgt / h_src (not raw)
    scale_pair_terms: bool = True    #: compare pair distances / penetrations scaled by h_tgt / h_src (not raw)
    contact_focus: float = 3.0       #: L_dist's weight × (1 + contact_focus · W_src): source contacts matched closer
    #: L_dist also keeps each pair on the source's side of d_min (in contact or apart), as far from it as the
    #: source is, up to ``contact_margin`` of d_min: × this, on L_dist's scale (``losses.contact_state_loss``,
    #: docs/solver.md "Pair terms: the contact state"). 0: off
    contact_state: float = 200.0
    contact_margin: float = 0.1
    #: the contact state between the characters of a joint solve too (× contact_state, on the partner L_dist's
    #: scale): hands held more often, but each character's own contacts kept less (docs/solver.md "Multi-character")
    partner_contact_state: bool = False
    #: where a fitted source body (a skeleton-only source) holds a key vertex behind another's surface, L_pen only
    #: keeps the target's from being behind it: the overlap is the fit's, not the capture's (docs/solver.md)
    fitted_pen_surface: bool = True
    foot_contact: bool = True        #: where the source foot is grounded, match lowest sole points (docs/solver.md)
    foot_lock: float = 2.0           #: where the source foot is locked, the target's sole must not slide (0: off)
    #: where the source foot is grounded, its lowest sole point held at the source foot's height: × this, beside
    #: L_height on the floor barrier's scale (docs/solver.md "Foot contact weight"; 1 until 2026-11-26)
    foot_contact_weight: float = 2.0
    contact_band: tuple = (CONTACT_MIN, CONTACT_MAX)  #: source foot height (share of h_c): contact 1 -> 0
    lock_band: tuple = (LOCK_MIN, LOCK_MAX)           #: source foot speed (share of h_c per s): locked 1 -> 0
    #: where the source foot has a lock weight λ (slower than lock_band's top), the target sole's windowed speed
    #: above this share of h_c per s is charged too, × (1 − λ), in the lock term (0: off; docs/solver.md "A speed
    #: cap on the locked feet"; off until 2026-11-27)
    lock_cap: float = 0.008
    optimise_fingers: bool = False
    #: the source's floor: "auto" (its own: z = 0 where it stands on it, else tracked; docs/metrics.md "Whose
    #: floor"), "zero" (z = 0), "estimate" (one level from its lowest foot contacts), "track" (one level per
    #: frame, following a drift), metres, or a (T,) sequence of metres (core.contacts.ground)
    source_ground: object = "auto"
    #: optional terrain under the target (z = f(x, y), ReConForM §6.2): a core.contacts.terrain.HeightField, or any
    #: differentiable callable f(x, y); core.pipeline.retarget sets it from RetargetOptions.ground (docs/solver.md)
    terrain: object = None
    #: {(body part, term): factor} per-part overrides (``part_weights_from``); term one of PART_WEIGHT_TERMS
    #: ("partner": the terms between the characters of a joint solve at that part's key vertices; a part's own
    #: dist / dir / pen factors act on its own pairs only)
    part_weights: dict = field(default_factory=dict)
    resolve_fraction: float = 0.3    #: share of ``iterations`` a warm-started re-solve takes
    #: ... when it continues the last solve's optimiser (``SolveJob(warm_state=...)``, at full learning rates)
    resolve_state_fraction: float = 0.05
    warm_lr: float = 0.3             #: the learning rates of a warm-started solve, as a share of lr_rot / lr_root
    device: str = "cpu"              #: "cpu", or "cuda" on request
    #: on a GPU, torch's deterministic algorithms (every run gives the same result; off: faster on a GPU, runs
    #: differ by rounding). The CPU's solve is deterministic either way (docs/solver.md "GPU")
    deterministic: bool = True
    #: on a GPU, the pose map (control points → key vertices, normals, body points) recorded once as a CUDA graph,
    #: forward and backward, and replayed at every step: the same kernels without their launch cost (docs/solver.md
    #: "GPU"). Nothing changes on the CPU
    cuda_graph: bool = True
    #: on the CPU, the pose map and its dense terms compiled by torch.compile (needs a C++ compiler; the first
    #: solve of each clip length in a process pays the compilation; falls back to eager; docs/solver.md)
    compile: bool = False
    dtype: str = "float32"
    seed: int = 0
    num_threads: int = None          #: torch intra-op threads (None: leave torch's setting)

    @classmethod
    def preset(cls, name: str = "balanced", **overrides) -> "SolverSettings":
        """Quality presets 'fast', 'balanced' (default) and 'best'; keyword overrides win."""
        if name not in PRESETS:
            raise CoreError(f"Unknown quality preset '{name}': use one of {', '.join(PRESETS)}.")
        return replace(cls(), **{**PRESETS[name], **overrides})

    def num_steps(self, warm: bool = False, continued: bool = False) -> int:
        """Adam steps of a solve: ``iterations``, or for a warm-started re-solve that share of them
        (``resolve_state_fraction`` when it continues the last solve's optimiser, else ``resolve_fraction``)."""
        if not warm:
            return max(1, int(self.iterations))
        share = self.resolve_state_fraction if continued else self.resolve_fraction
        return max(1, math.ceil(self.iterations * share))

    def weight(self, term: str) -> float:
        w = getattr(self, f"w_{term}")
        return w * self.w_sem if term in SEMANTIC_TERMS else w

    def torch_dtype(self):
        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    @property
    def ground(self):
        """The target's ground for height terms: the terrain, or the level 0."""
        return self.terrain if self.terrain is not None else 0.0

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("terrain",)}


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
