"""The ReConForM solver (method.md §1.6): Adam over the target's rotations and root position, all frames at
once, on key-vertex descriptors of source and target.

Drive it as a generator (UI worker thread, batch command)::

    job = SolveJob(source, source_motion, target, init_motion, SolverSettings.preset("balanced"))
    for progress in job.steps():      # Progress(fraction, step, total, loss, terms)
        ...                           # job.cancel() from another thread stops it between steps
    motion = job.result()             # core.Motion of the target

Objective, weights, parametrisation, schedule and sparsity are documented in docs/solver.md.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

import numpy as np
import torch

from .descriptors import KeyVertexRig, height, pair_descriptors, sliding
from .errors import CoreError
from .humanoid import CORE_BONES, FINGER_BONES, limb_of
from .losses import jerk, dir_loss, dist_loss, height_loss, pen_loss, reg_loss, sliding_loss, smooth_loss
from .rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix, sixd_to_matrix
from .types import Character, Motion
from .weights import (MAX_FRACTION, MIN_FRACTION, ActivePairs, allowed_pairs, alpha_ramp, floor_weight,
                      interaction_weight)

#: Semantic terms (L_sem) and all terms, in reporting order.
SEMANTIC_TERMS = ("dist", "dir", "pen", "height", "sliding")
TERMS = ("reg", "smooth") + SEMANTIC_TERMS

_IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


@dataclass
class SolverSettings:
    """Every knob of the solver. Defaults and the measurements behind them: docs/solver.md.

    Weights multiply terms that are first divided by their reference scale (docs/solver.md "Balancing"), so
    a weight of 1 means "as important as at the start of the solve".
    """

    w_reg: float = 0.3          #: key vertices stay near the copy-rotations result
    w_smooth: float = 0.5       #: jerk of key vertices (non-squared, as printed)
    w_sem: float = 1.0          #: multiplies the five semantic terms below
    w_dist: float = 1.0
    w_dir: float = 1.0
    w_pen: float = 1.0
    w_height: float = 1.0       #: includes the unweighted floor barrier
    w_sliding: float = 1.0
    iterations: int = 120       #: Adam steps of a first solve
    lr_rot: float = 0.02        #: Adam step on the 6D rotation residual (≈ radians)
    lr_root: float = 0.01       #: Adam step on the root offset, in units of the target's height h_c
    adam_eps: float = 1e-3      #: Adam ε on gradients of the loss × number of control points (damps noise)
    warmup: float = 0.1         #: share of the steps over which the learning rates ramp up linearly
    lr_final: float = 0.1       #: the learning rate decays (cosine) to this fraction at the last step
    smooth_mode: str = "added"  #: "added": jerk added to the initial motion; "absolute": the jerk itself
    knot_spacing: float = 0.1   #: seconds between B-spline control points of the residual (0: per frame)
    refresh_every: int = 10     #: steps between refreshes of the active pair set
    pair_margin: float = 0.05   #: target pairs closer than d_max + margin·h_c are kept active
    exclude_same_limb: bool = True
    optimise_fingers: bool = False
    source_ground: object = "zero"   #: "zero", "estimate" (from the source's lowest foot contacts) or metres
    terrain: object = None           #: optional descriptors.HeightField for the target (z = f(x, y))
    part_weights: dict = field(default_factory=dict)  #: {(body part, term): factor} per-part overrides
    resolve_fraction: float = 0.3    #: share of ``iterations`` a warm-started re-solve takes
    device: str = "cpu"              #: "cpu", or "cuda" on request
    dtype: str = "float32"
    seed: int = 0
    num_threads: int = None          #: torch intra-op threads (None: leave torch's setting)

    @classmethod
    def preset(cls, name: str = "balanced", **overrides) -> "SolverSettings":
        """Quality presets 'fast', 'balanced' (default) and 'best'; keyword overrides win."""
        presets = {
            "fast": dict(iterations=60, lr_rot=0.03, refresh_every=15),
            "balanced": dict(),
            "best": dict(iterations=300, lr_rot=0.015, refresh_every=5),
        }
        if name not in presets:
            raise CoreError(f"Unknown quality preset '{name}': use one of {', '.join(presets)}.")
        return replace(cls(), **{**presets[name], **overrides})

    def weight(self, term: str) -> float:
        w = getattr(self, f"w_{term}")
        return w * self.w_sem if term in SEMANTIC_TERMS else w

    def torch_dtype(self):
        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("terrain",)}


class Progress(NamedTuple):
    """One solver step: fraction done in (0, 1], step index, total steps, total loss, {term: weighted value}."""

    fraction: float
    step: int
    total: int
    loss: float
    terms: dict


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------

def _canonical_of(character: Character) -> dict:
    """{bone index: canonical name} of the mapped bones of a character."""
    out = {}
    names = character.skeleton.names
    for canon, bone in character.bone_map.items():
        if bone in names:
            out[names.index(bone)] = canon
    return out


def _check_motion(character: Character, motion: Motion, what: str):
    J = character.skeleton.num_bones
    if motion.rotations.shape[1] != J:
        raise CoreError(f"{what} has {motion.rotations.shape[1]} bone channels but armature "
                        f"'{character.name}' has {J} bones: read the motion from that armature.")
    if motion.num_frames < 1:
        raise CoreError(f"{what} has no frames: pick a frame range with at least one frame.")


def _align_keyverts(source: Character, target: Character) -> np.ndarray:
    """Order of the target's key vertices matching the source's names; raises when they differ."""
    sn, tn = source.keyverts.names, target.keyverts.names
    if sn == tn:
        return np.arange(len(tn))
    missing = sorted(set(sn) ^ set(tn))
    if missing:
        raise CoreError(f"Key vertices of '{source.name}' and '{target.name}' differ ({', '.join(missing[:4])}"
                        f"...): transfer both from the same template size.")
    return np.asarray([tn.index(n) for n in sn])


def _reordered(character: Character, order: np.ndarray) -> Character:
    if np.array_equal(order, np.arange(len(order))):
        return character
    kv = character.keyverts
    from .types import KeyVertexSet
    new_kv = KeyVertexSet(tuple(kv.names[k] for k in order), tuple(kv.limbs[k] for k in order),
                          kv.vertex_ids[order], kv.locked[order], kv.eye)
    return replace(character, keyverts=new_kv)


def _dominant_bone(mesh) -> np.ndarray:
    rows = np.arange(mesh.num_verts)
    return mesh.weight_bones[rows, np.argmax(mesh.weight_values, axis=1)]


def estimate_ground(character: Character, motion: Motion, percentile: float = 3.0,
                    max_vertices: int = 400) -> float:
    """Ground level (world z, metres) of a clip from its lowest foot contacts.

    The lowest point of the feet (mesh vertices whose dominant bone is a mapped foot or toes bone, subsampled
    to ``max_vertices``) is taken per frame; the ground is the ``percentile`` of those minima over the clip,
    which ignores a few airborne or glitched frames (the inventory of ../shared/assets uses 3 %).
    """
    from .kinematics import ForwardKinematics
    from .skinning import SkinningMatrices, skin_vertices

    sk, mesh = character.skeleton, character.mesh
    if mesh is None:
        raise CoreError(f"Character '{character.name}' has no mesh: fit a body before estimating its ground.")
    feet = [sk.index(character.bone_map[c]) for c in ("left_foot", "left_toes", "right_foot", "right_toes")
            if character.bone_map.get(c) in sk.names]
    if not feet:
        raise CoreError(f"Character '{character.name}': no foot bones in its bone map; map left_foot and "
                        f"right_foot to estimate the ground.")
    ids = np.nonzero(np.isin(_dominant_bone(mesh), feet))[0]
    if len(ids) == 0:
        raise CoreError(f"Character '{character.name}': no mesh vertices are skinned to its feet.")
    if len(ids) > max_vertices:
        ids = ids[np.linspace(0, len(ids) - 1, max_vertices).astype(np.int64)]
    fk = ForwardKinematics(sk, torch.float64)
    sm = SkinningMatrices(sk, torch.float64)
    A = torch.as_tensor(sk.object_matrix[:3, :3])
    b = torch.as_tensor(sk.object_matrix[:3, 3])
    lows = []
    with torch.no_grad():
        for s in range(0, motion.num_frames, 512):
            rot = quat_to_matrix(torch.as_tensor(motion.rotations[s:s + 512]))
            loc = torch.as_tensor(motion.locations[s:s + 512])
            r, t = sm(fk(rot, loc))
            p, _ = skin_vertices(r, t, mesh.rest_verts[ids], mesh.weight_bones[ids], mesh.weight_values[ids])
            lows.append((p @ A.T + b)[..., 2].min(dim=-1).values.numpy())
    return float(np.percentile(np.concatenate(lows), percentile))


def bspline_basis(num_frames: int, spacing: float) -> np.ndarray:
    """(T, C) uniform cubic B-spline basis with control points every ``spacing`` frames (identity if <= 1).

    Row t holds the weights of the 4 control points that shape frame t; rows sum to 1.
    """
    if spacing <= 1.0 or num_frames < 4:
        return np.eye(num_frames)
    u = np.arange(num_frames) / spacing
    seg = np.minimum(np.floor(u).astype(np.int64), int(np.floor((num_frames - 1) / spacing)))
    s = u - seg
    C = int(np.floor((num_frames - 1) / spacing)) + 4
    b = np.stack([(1 - s) ** 3, 3 * s ** 3 - 6 * s ** 2 + 4, -3 * s ** 3 + 3 * s ** 2 + 3 * s + 1, s ** 3], 1) / 6
    B = np.zeros((num_frames, C))
    rows = np.arange(num_frames)
    for m in range(4):
        B[rows, seg + m] = b[:, m]
    return B


# ----------------------------------------------------------------------------------------------------------
# the job
# ----------------------------------------------------------------------------------------------------------

class SolveJob:
    """One retargeting solve of ``source_motion`` from ``source`` onto ``target``.

    Args:
        source, target: Characters with skeleton, mesh, bone_map, keyverts (same template) and height.
        source_motion: the source clip (Motion of the source skeleton; never modified).
        init_motion: the copy-rotations result on the target (Motion of the target skeleton, same frames).
        settings: SolverSettings (default: the 'balanced' preset).
        warm_start: optional previous result (Motion of the target) to start from ('Re-solve'): α is held at 1
            and ``settings.resolve_fraction · settings.iterations`` steps are taken.
    """

    def __init__(self, source: Character, source_motion: Motion, target: Character, init_motion: Motion,
                 settings: SolverSettings = None, warm_start: Motion = None):
        self.settings = settings or SolverSettings.preset("balanced")
        _check_motion(source, source_motion, f"Source motion of '{source.name}'")
        _check_motion(target, init_motion, f"Initial motion of '{target.name}'")
        if init_motion.num_frames != source_motion.num_frames:
            raise CoreError(f"Initial motion of '{target.name}' has {init_motion.num_frames} frames but the "
                            f"source clip has {source_motion.num_frames}: copy the rotations of the same range.")
        if warm_start is not None:
            _check_motion(target, warm_start, f"Previous result on '{target.name}'")
            if warm_start.num_frames != init_motion.num_frames:
                raise CoreError("The previous result covers another frame range: retarget from scratch.")
        for c in (source, target):
            if "hips" not in c.bone_map or c.bone_map["hips"] not in c.skeleton.names:
                raise CoreError(f"Armature '{c.name}': map its hips bone in the bone map before solving.")
        order = _align_keyverts(source, target)
        self.source = source
        self.target = _reordered(target, order)
        self.source_motion = source_motion
        self.init_motion = init_motion
        self.warm_start = warm_start
        self.fps = float(source_motion.fps)
        self.total = max(1, int(self.settings.iterations if warm_start is None
                                else math.ceil(self.settings.iterations * self.settings.resolve_fraction)))
        self._cancel = threading.Event()
        self._ready = False
        self._done = False
        self._step = 0
        self.history = []     # per step {term: weighted normalised value}
        self.stats = {}
        self._metrics = None

    # -- public API -------------------------------------------------------------------------------------

    def cancel(self):
        """Ask the solve to stop before its next step (thread-safe)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done

    def steps(self):
        """Generator: sets up (first call), then yields one Progress per Adam step; stops early on cancel."""
        s = self.settings
        prev_threads = torch.get_num_threads()
        if s.num_threads:
            torch.set_num_threads(int(s.num_threads))
        try:
            if not self._ready:
                t0 = time.perf_counter()
                self._setup()
                self.stats["setup_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            while self._step < self.total:
                if self._cancel.is_set():
                    return
                prog = self._adam_step()
                yield prog
            self._done = True
            self.stats["solve_s"] = time.perf_counter() - t0
            self.stats["frames_per_s"] = self.num_frames / max(self.stats["solve_s"], 1e-9)
        finally:
            if s.num_threads:
                torch.set_num_threads(prev_threads)

    def run(self) -> Motion:
        """Run every step synchronously and return the result."""
        for _ in self.steps():
            pass
        return self.result()

    def result(self) -> Motion:
        """The retargeted target Motion (sign-continuous WXYZ basis rotations; hips location in basis space).

        Bones that are not optimised keep the initial motion's channels exactly.
        """
        if self.cancelled and not self._done:
            raise CoreError("The solve was cancelled: nothing was produced.")
        if not self._done:
            raise CoreError("The solve has not finished: drive job.steps() to the end first.")
        with torch.no_grad():
            rot_opt, loc_root = self._opt_channels()
        rot = self.init_motion.rotations.copy()
        q = matrix_to_quat(rot_opt.double()).cpu().numpy()  # (T, Jo, 4)
        oi = self.opt_idx.cpu().numpy()
        # keep the initial sign at frame 0, then make every channel continuous over time
        init0 = rot[0, oi]
        flip0 = (q[0] * init0).sum(-1) < 0
        q[:, flip0] *= -1
        rot[:, oi] = quat_make_continuous(q, axis=0)
        loc = self.init_motion.locations.copy()
        loc[:, self.root_idx] = loc_root.double().cpu().numpy()
        return Motion(rot, loc, self.init_motion.fps, self.init_motion.frame_start)

    @property
    def metrics(self) -> dict:
        """Statistics of the solve (timings, frames/s, active pair entries, reference scales, last terms).

        Quality metrics of the result are ``core.metrics.evaluate`` (a full-mesh pass, computed on demand).
        """
        out = {k: v for k, v in self.stats.items()}
        out["steps"] = self._step
        if self.history:
            out["final_terms"] = dict(self.history[-1])
        return out

    @property
    def num_frames(self) -> int:
        return self.init_motion.num_frames

    # -- setup ------------------------------------------------------------------------------------------

    def _setup(self):
        s = self.settings
        torch.manual_seed(s.seed)
        dt, dev = s.torch_dtype(), torch.device(s.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise CoreError("CUDA was requested but torch sees no CUDA device: choose the CPU device.")
        self.dtype, self.device = dt, dev
        src, tgt = self.source, self.target
        T = self.num_frames
        self.src_rig = KeyVertexRig(src, dt, dev)
        self.root_idx = tgt.skeleton.index(tgt.bone_map["hips"])
        self.rig = KeyVertexRig(tgt, dt, dev, extra_bones=[[self.root_idx]])
        part = self.rig.parts[0]
        self.h_src = float(src.height)
        self.h_tgt = float(tgt.height)

        # source descriptors (fixed)
        with torch.no_grad():
            srot = quat_to_matrix(torch.as_tensor(self.source_motion.rotations, dtype=dt, device=dev))
            sloc = torch.as_tensor(self.source_motion.locations, dtype=dt, device=dev)
            self.src_p, self.src_n = self.src_rig(srot, sloc)
        ground = s.source_ground
        if isinstance(ground, str):
            if ground == "zero":
                ground = 0.0
            elif ground == "estimate":
                ground = estimate_ground(src, self.source_motion)
            else:
                raise CoreError(f"source_ground must be 'zero', 'estimate' or a number, not '{ground}'.")
        self.source_ground_level = float(ground)
        self.stats["source_ground"] = self.source_ground_level
        self.src_h = height(self.src_p, self.source_ground_level)
        self.src_vel = sliding(self.src_p, self.fps)
        self.wf_src = floor_weight(self.src_h, MIN_FRACTION * self.h_src, MAX_FRACTION * self.h_src)

        # target variables
        canon = _canonical_of(tgt)
        wanted = set(CORE_BONES) | (set(FINGER_BONES) if s.optimise_fingers else set())
        # bones that move no key vertex cannot change the objective: they keep the initial motion
        opt = sorted(j for j, c in canon.items() if c in wanted and j in part.position)
        if self.root_idx not in opt:
            opt = sorted(opt + [self.root_idx])
        self.opt_idx = torch.as_tensor(opt, device=dev)
        self.opt_parts = [limb_of(canon[j]) if j in canon else "torso" for j in opt]
        R0 = quat_to_matrix(torch.as_tensor(self.init_motion.rotations, dtype=torch.float64))
        self.R_init = R0.to(dt).to(dev)                     # (T, J, 3, 3)
        self.R_init_opt = self.R_init[:, self.opt_idx]      # (T, Jo, 3, 3)
        self.L_init = torch.as_tensor(self.init_motion.locations, dtype=dt, device=dev)
        # channels of the bones the rig evaluates (T, Jn, ...), and where the optimised ones sit among them
        self.R_init_n = self.R_init[:, part.needed_t]
        self.L_init_n = self.L_init[:, part.needed_t]
        self.opt_pos = torch.as_tensor([part.position[j] for j in opt], device=dev)
        self.root_pos = torch.as_tensor([part.position[self.root_idx]], device=dev)
        self.root_jac_inv = self._root_jacobian_inverse().to(dt).to(dev)  # (T, 3, 3) world -> basis
        basis = bspline_basis(T, s.knot_spacing * self.fps)
        self.basis = torch.as_tensor(basis, dtype=dt, device=dev)           # (T, C)
        self.num_controls = basis.shape[1]
        C = self.num_controls
        self.delta = torch.zeros((C, len(opt), 6), dtype=dt, device=dev)    # 6D residual controls
        self.root_off = torch.zeros((C, 3), dtype=dt, device=dev)           # world offset / h_tgt
        if self.warm_start is not None:
            self._init_from(self.warm_start)
        self.delta.requires_grad_(True)
        self.root_off.requires_grad_(True)

        self.identity6 = torch.as_tensor(_IDENTITY_6D, dtype=dt, device=dev)
        with torch.no_grad():  # through the same path as the solve, so zero residuals give exactly p_init
            zero = (torch.zeros((T, len(opt), 6), dtype=dt, device=dev), torch.zeros((T, 3), dtype=dt, device=dev))
            self.p_init, self.n_init = self._forward(zero)
            self.jerk_init = jerk(self.p_init, self.fps) if T >= 4 else None
        if s.smooth_mode not in ("added", "absolute"):
            raise CoreError(f"smooth_mode must be 'added' or 'absolute', not '{s.smooth_mode}'.")

        # per-term per-key-vertex multipliers from part overrides
        self.vertex_scale = self._vertex_scales()

        # sparse pairs
        mask = allowed_pairs(self.rig.limbs, None, s.exclude_same_limb)
        self.pairs = ActivePairs(self.src_p, self.src_n, self.src_rig.heights[self.src_rig.character],
                                 self.rig.heights[self.rig.character], mask, s.pair_margin)
        with torch.no_grad():
            p_now, _ = self._forward()
        self.pairset = self.pairs.build(p_now)
        self.stats["source_pair_entries"] = self.pairs.num_source_entries
        self.stats["pairs_allowed"] = int(mask.sum())
        self.stats["frames"] = T

        # balancing scales from the initial state (α = 0)
        with torch.no_grad():
            raw = self._raw_terms(self.p_init, self.n_init, alpha=0.0, pairset=self.pairs.build(self.p_init))
        self.scales = self._reference_scales(raw)
        self.stats["initial_raw"] = {k: float(v) for k, v in raw.items()}
        self.stats["scales"] = dict(self.scales)

        lr_root = s.lr_root  # root offset is stored in units of h_tgt
        self.optim = torch.optim.Adam([{"params": [self.delta], "lr": s.lr_rot},
                                       {"params": [self.root_off], "lr": lr_root}], eps=s.adam_eps)
        self.base_lrs = [s.lr_rot, lr_root]
        self._ready = True

    def _root_jacobian_inverse(self) -> torch.Tensor:
        """(T, 3, 3) map from a world-space offset of the hips head to its basis location (per frame)."""
        from .kinematics import forward_kinematics
        sk = self.target.skeleton
        r = self.root_idx
        p = sk.parents[r]
        A = sk.object_matrix[:3, :3]
        rest_rot = sk.rest_local[r, :3, :3]
        if p < 0:
            Jm = np.broadcast_to(A @ rest_rot, (self.num_frames, 3, 3))
        else:
            pose = forward_kinematics(sk, self.init_motion.rotations, self.init_motion.locations)
            Gp = pose.rotations[:, p].numpy()
            Jm = A @ Gp @ rest_rot
        return torch.as_tensor(np.linalg.inv(Jm) * self.h_tgt)  # root_off is in units of h_tgt

    def _init_from(self, motion: Motion):
        R = quat_to_matrix(torch.as_tensor(motion.rotations, dtype=torch.float64))[:, self.opt_idx.cpu()]
        Ri = self.R_init_opt.double().cpu()
        rel = Ri.transpose(-1, -2) @ R
        d6 = torch.cat((rel[..., :, 0], rel[..., :, 1]), dim=-1) - torch.as_tensor(_IDENTITY_6D,
                                                                                 dtype=torch.float64)
        dloc = torch.as_tensor(motion.locations[:, self.root_idx] - self.init_motion.locations[:, self.root_idx])
        Jinv = self.root_jac_inv.double().cpu()
        off = torch.linalg.solve(Jinv, dloc[..., None])[..., 0]
        # least-squares fit of the control points to the per-frame residuals
        pinv = torch.linalg.pinv(self.basis.double().cpu())
        T = d6.shape[0]
        self.delta = (pinv @ d6.reshape(T, -1)).reshape(-1, *d6.shape[1:]).to(self.dtype).to(self.device)
        self.root_off = (pinv @ off).to(self.dtype).to(self.device).contiguous()

    def _vertex_scales(self) -> dict:
        """{term: (N,) multiplier or None} from settings.part_weights {(part, term): factor}."""
        out = {t: None for t in TERMS}
        pw = self.settings.part_weights or {}
        limbs = np.asarray(self.rig.limbs)
        for (part, term), factor in pw.items():
            if term not in out:
                raise CoreError(f"Unknown loss term '{term}' in per-part weights; use one of {', '.join(TERMS)}.")
            m = out[term] if out[term] is not None else np.ones(len(limbs))
            m = m.copy()
            m[limbs == part] *= float(factor)
            out[term] = m
        return {t: (None if m is None else torch.as_tensor(m, dtype=self.dtype, device=self.device))
                for t, m in out.items()}

    def _reference_scales(self, raw: dict) -> dict:
        """Reference scale of each term: its initial value, floored by the value a small uniform residual
        would give (docs/solver.md "Balancing")."""
        h = self.h_tgt
        T, N = self.p_init.shape[:2]
        ps = self.pairs.build(self.p_init)
        w2 = float(ps.w_src.square().sum()) if len(ps) else 0.0
        wf2 = float(self.wf_src.square().sum())
        ref = 0.01 * h   # 1 % of the target's height
        floors = {
            "reg": T * N * ref ** 2,
            "smooth": max(T - 3, 1) * N * 1.0 * h,            # 1 h_c / s³ per key vertex and frame
            "dist": w2 * ref ** 2,
            "dir": w2 * (1.0 - math.cos(math.radians(10.0))) ** 2,
            "pen": 2.0 * w2 * ref ** 2,
            "height": wf2 * ref ** 2,
            "sliding": wf2 * (0.1 * h) ** 2,                 # 10 % h_c / s of foot sliding
        }
        out = {}
        with torch.no_grad():
            raw = dict(raw, smooth=float(smooth_loss(self.p_init, self.fps)))  # absolute initial jerk
        for k in TERMS:
            init = 0.0 if k == "reg" else float(raw[k])
            out[k] = max(init, floors[k], 1e-12)
        return out

    # -- forward ----------------------------------------------------------------------------------------

    def frame_residuals(self):
        """Per-frame 6D residuals (T, Jo, 6) and root offsets (T, 3) from the control points."""
        C, Jo = self.delta.shape[:2]
        d = (self.basis @ self.delta.reshape(C, Jo * 6)).reshape(-1, Jo, 6)
        return d, self.basis @ self.root_off

    def _opt_channels(self, residuals=None):
        """Current (T, Jo, 3, 3) rotations of the optimised bones and (T, 3) hips basis location."""
        d, off = self.frame_residuals() if residuals is None else residuals
        R = self.R_init_opt @ sixd_to_matrix(self.identity6 + d)
        loc = self.L_init[:, self.root_idx] + (self.root_jac_inv @ off[..., None])[..., 0]
        return R, loc

    def _forward(self, residuals=None):
        R, loc_root = self._opt_channels(residuals)
        rot = self.R_init_n.index_copy(1, self.opt_pos, R)
        loc = self.L_init_n.index_copy(1, self.root_pos, loc_root[:, None])
        return self.rig.parts[0].keyverts_needed(rot, loc)

    def _raw_terms(self, p, n, alpha: float, pairset) -> dict:
        """Unweighted, unnormalised terms at positions p (T, N, 3), normals n (T, N, 3)."""
        s = self.settings
        vs = self.vertex_scale
        ht = self.h_tgt
        out = {}
        out["reg"] = reg_loss(p, self.p_init, vs["reg"])
        ref = self.jerk_init if self.settings.smooth_mode == "added" else None
        # ε: a 10 µm third difference, far below float32 noise of visible motion yet above round-off
        out["smooth"] = smooth_loss(p, self.fps, vs["smooth"], eps=1e-5 * self.fps ** 3, reference=ref)
        # height & sliding (dense over key vertices: (T, N))
        h = height(p, s.terrain if s.terrain is not None else 0.0)
        wf = self.wf_src + alpha * floor_weight(h, MIN_FRACTION * ht, MAX_FRACTION * ht).detach()
        out["height"] = height_loss(h, self.src_h, wf, vs["height"])
        vel = sliding(p, self.fps)
        out["sliding"] = sliding_loss(vel, self.src_vel, wf[:-1], vs["sliding"])
        # pair terms on the sparse active set
        if len(pairset):
            d = pair_descriptors(p, n, pairset.t, pairset.i, pairset.j)
            N = p.shape[1]
            n_j = n.reshape(-1, 3).index_select(0, pairset.t * N + pairset.j)
            pen_ji = -(n_j * d.dir).sum(-1)
            w = pairset.w_src + alpha * interaction_weight(d.dist, pairset.tgt_dmin, pairset.tgt_dmax).detach()

            def pscale(term):
                m = vs[term]
                return None if m is None else 0.5 * (m[pairset.i] + m[pairset.j])
            out["dist"] = dist_loss(d.dist, pairset.src_dist, w, pscale("dist"))
            # directions of (nearly) touching pairs are noise (and their gradient grows as 1 / distance):
            # L_dir fades from 1 at d_min to 0 at d_min / 2, in the source or in the target
            fade = torch.minimum(pairset.src_dist / pairset.src_dmin, d.dist.detach() / pairset.tgt_dmin)
            fade = (2.0 * fade - 1.0).clamp(0.0, 1.0)
            out["dir"] = dir_loss(d.dir, pairset.src_dir, w * fade, pscale("dir"))
            ps = pscale("pen")
            out["pen"] = pen_loss(d.pen, pairset.src_pen_ij, w, ps) + pen_loss(pen_ji, pairset.src_pen_ji, w, ps)
        else:
            zero = p.sum() * 0.0
            out["dist"] = out["dir"] = out["pen"] = zero
        return out

    def _alpha(self) -> float:
        return 1.0 if self.warm_start is not None else alpha_ramp(self._step, self.total)

    def weighted_terms(self, alpha: float = None, pairset=None, residuals=None) -> dict:
        """{term: weight · raw / scale} at the current variables (differentiable w.r.t. them, or w.r.t.
        ``residuals`` = (per-frame 6D (T, Jo, 6), root offset (T, 3)) when given)."""
        alpha = self._alpha() if alpha is None else alpha
        p, n = self._forward(residuals)
        raw = self._raw_terms(p, n, alpha, self.pairset if pairset is None else pairset)
        return {k: self.settings.weight(k) * raw[k] / self.scales[k] for k in TERMS}

    def _adam_step(self) -> Progress:
        s = self.settings
        step = self._step
        if step % max(1, s.refresh_every) == 0 and step > 0:
            with torch.no_grad():
                p_now, _ = self._forward()
            self.pairset = self.pairs.build(p_now)
        # cosine decay of the learning rates to lr_final
        c = 0.5 * (1 + math.cos(math.pi * step / max(self.total - 1, 1)))
        warm = min(1.0, (step + 1) / max(1.0, s.warmup * self.total))
        for g, base in zip(self.optim.param_groups, self.base_lrs):
            g["lr"] = base * warm * (s.lr_final + (1 - s.lr_final) * c)
        prev = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            self.optim.zero_grad(set_to_none=True)
            terms = self.weighted_terms()
            loss = sum(terms.values())
            # gradients per control point are O(1 / controls): rescale so that adam_eps means the same
            # thing for every clip length
            (loss * self.num_controls).backward()
            self.optim.step()
        finally:
            torch.use_deterministic_algorithms(prev)
        vals = {k: float(v.detach()) for k, v in terms.items()}
        self.history.append(vals)
        self._step += 1
        return Progress(self._step / self.total, step, self.total, float(loss.detach()), vals)
