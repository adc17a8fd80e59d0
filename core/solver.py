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
from .ground import ground_levels
from .humanoid import CORE_BONES, FINGER_BONES, limb_of
from .losses import (jerk, dir_loss, dist_loss, floor_barrier, height_loss, pen_loss, reg_loss, sliding_loss,
                     smooth_loss)
from .metrics import LOCK_WINDOW_S, window_bounds
from .rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix, sixd_to_matrix
from .types import Character, Motion
from .weights import (MAX_FRACTION, MIN_FRACTION, ActivePairs, allowed_pairs, alpha_ramp, floor_weight,
                      interaction_weight)

#: Semantic terms (L_sem) and all terms, in reporting order.
SEMANTIC_TERMS = ("dist", "dir", "pen", "height", "sliding")
#: a source foot whose lowest point is within CONTACT_MIN of h_c of its ground is in contact (weight 1),
#: fading to 0 at CONTACT_MAX (twice the grounded band of docs/metrics.md, 1 %: docs/solver.md "Foot contact")
CONTACT_MIN, CONTACT_MAX = 0.02, 0.04
TERMS = ("reg", "smooth") + SEMANTIC_TERMS
#: a source foot whose lowest point moves slower than LOCK_MIN of h_c per second (over LOCK_WINDOW_S, as the
#: foot-locked metric of docs/metrics.md) is locked (weight 1), fading to 0 at LOCK_MAX
LOCK_MIN, LOCK_MAX = 0.005, 0.01
#: a foot vertex within SOLE_BAND of h_c of its foot's lowest vertex on a frame carries the foot there
SOLE_BAND = 0.005
#: the lowest sole point of a foot is a soft minimum with this temperature (share of h_c)
SOFT_LOW = 0.001

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
    w_sliding: float = 5.0      #: measured: mean foot-locked F1 0.32 -> 0.37 over the bench cases
    iterations: int = 120       #: Adam steps of a first solve
    lr_rot: float = 0.02        #: Adam step on the 6D rotation residual (≈ radians)
    lr_root: float = 0.01       #: Adam step on the root offset, in units of the target's height h_c
    adam_eps: float = 1e-3      #: Adam ε on gradients of the loss × number of control points (damps noise)
    warmup: float = 0.1         #: share of the steps over which the learning rates ramp up linearly
    lr_final: float = 0.1       #: the learning rate decays (cosine) to this fraction at the last step
    smooth_mode: str = "added"  #: "added": jerk added to the initial motion; "absolute": the jerk itself
    knot_spacing: float = 0.1   #: seconds between B-spline control points of the residual (0: per frame)
    exclude_same_limb: bool = True
    clamp_source_height: bool = True  #: L_height matches source heights below the floor at 0
    sliding_floor: float = 0.1       #: floor of L_sliding's reference scale, in h_c / s of sliding
    sole_points: int = 24            #: per foot, mesh sole points under the floor barrier (0: key vertices only)
    root_init: str = "feet"          #: "feet": start the root where planted feet stay put; "copy": copy-rot's
    reg_free_root_xy: bool = True    #: L_reg ignores the horizontal root offset (docs/solver.md)
    scale_floor_terms: bool = True   #: compare heights / foot velocities scaled by h_tgt / h_src (not raw)
    foot_contact: bool = True        #: where the source foot is grounded, match lowest sole points (docs/solver.md)
    foot_lock: float = 1.0           #: where the source foot is locked, the target's sole must not slide (0: off)
    contact_band: tuple = (CONTACT_MIN, CONTACT_MAX)  #: source foot height (share of h_c): contact 1 -> 0
    lock_band: tuple = (LOCK_MIN, LOCK_MAX)           #: source foot speed (share of h_c per s): locked 1 -> 0
    optimise_fingers: bool = False
    #: the source's floor: "zero" (z = 0), "estimate" (one level from its lowest foot contacts), "track" (one
    #: level per frame, following a drift), metres, or a (T,) sequence of metres (core.ground)
    source_ground: object = "zero"
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
            "fast": dict(iterations=60, lr_rot=0.03),
            "balanced": dict(),
            "best": dict(iterations=300, lr_rot=0.015),
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


def _spread_sole_points(z: np.ndarray, rest: np.ndarray, band: float, count: int) -> np.ndarray:
    """Sole points of one foot: sorted indices (≤ count) into its vertices.

    z: (F, V) world heights of the foot's vertices on sampled frames; rest: (V, 3) their rest positions.
    A vertex is near the floor on a frame where it lies within ``band`` of that frame's lowest foot vertex;
    the vertices near it on at least 5 % as many frames as the most frequent one are spread over the sole by
    farthest-point sampling (in the rest pose), starting from the most frequent, so that a foot standing
    still and flat gets its whole outline (heel, ball, toe, both edges), not only the one vertex that happens
    to be lowest."""
    near = (z - z.min(-1, keepdims=True)) <= band                             # (F, V)
    freq = near.sum(0)
    cand = np.nonzero(freq >= max(1.0, 0.05 * freq.max()))[0]                # not a one-frame glitch
    cand = cand[np.argsort(-freq[cand], kind="stable")]
    if len(cand) <= count:
        return np.sort(cand)
    x = rest[cand]
    chosen = [0]
    d = np.linalg.norm(x - x[0], axis=1)
    while len(chosen) < count:
        k = int(np.argmax(d))
        if d[k] <= 0.0:
            break
        chosen.append(k)
        d = np.minimum(d, np.linalg.norm(x - x[k], axis=1))
    return np.sort(cand[chosen])


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


class _OptChain:
    """FK + LBS of the target's key vertices where only the optimised bones' rotations and the hips location
    vary (the hot path of every step).

    Everything that does not depend on the variables is computed once: global transforms of bones with no
    optimised ancestor, local transforms of the other bones, and the skinning contribution of constant bones.
    Per step only the "variable" bones (optimised, or below an optimised bone) are evaluated, level by level
    over tree depth, on bone-major (J, T, 3, 3) tensors, and skinning is one (N, Jv) @ (Jv, T·12) matmul.

    Args:
        part: descriptors._CharacterPart of the target (needed bones, rest data, skinning weights).
        R_n, L_n: (T, Jn, 3, 3) / (T, Jn, 3) initial basis channels of the needed bones.
        opt_pos: positions (among the needed bones) of the optimised bones, in the order of the variables.
        root_pos: position of the hips (its basis location varies).
    """

    def __init__(self, part, R_n, L_n, opt_pos, root_pos: int):
        Jn = len(part.needed)
        par = [-1] * Jn
        for ks, ps in part.levels:
            for k, pp in zip(ks, ps):
                par[k] = pp
        opt_of = {int(k): a for a, k in enumerate(opt_pos)}
        var = [False] * Jn
        for k in range(Jn):          # needed bones are topologically sorted
            var[k] = k in opt_of or k == root_pos or (par[k] >= 0 and var[par[k]])
        with torch.no_grad():
            G_rot0, G_pos0 = part.global_needed(R_n, L_n)
            loc_rot0 = part.rest_rot @ R_n                                   # (T, Jn, 3, 3)
            loc_pos0 = (part.rest_rot @ L_n[..., None])[..., 0] + part.rest_trans
            self.Gc_rot = G_rot0.transpose(0, 1).contiguous()               # (Jn, T, 3, 3) bone-major
            self.Gc_pos = G_pos0.transpose(0, 1).contiguous()
            self.Lc_rot = loc_rot0.transpose(0, 1).contiguous()
            self.Lc_pos = loc_pos0.transpose(0, 1).contiguous()
            S_rot = G_rot0 @ part.inv_rot
            S_t = (G_rot0 @ part.inv_trans[..., None])[..., 0] + G_pos0
            S = torch.cat([S_rot.flatten(-2), S_t], -1).transpose(0, 1)     # (Jn, T, 12)
            const = [k for k in range(Jn) if not var[k]]
            T = R_n.shape[0]
            N = part.W.shape[0]
            if const:
                self.B_const = (part.W[:, const] @ S[const].reshape(len(const), -1)).reshape(N, T, 12)
            else:
                self.B_const = None
        self.vk = [k for k in range(Jn) if var[k]]
        self.opt_slot = [opt_of.get(k, -1) for k in self.vk]
        self.root_slot = self.vk.index(root_pos)
        self.root_rest_rot = part.rest_rot[root_pos]
        self.root_rest_trans = part.rest_trans[root_pos]
        vpos = {k: a for a, k in enumerate(self.vk)}
        depth = {}
        for k in self.vk:
            depth[k] = depth[par[k]] + 1 if par[k] >= 0 and var[par[k]] else 0
        self.levels = []
        for d in range(max(depth.values()) + 1):
            ks = [k for k in self.vk if depth[k] == d]
            self.levels.append([(vpos[k], par[k], var[par[k]] if par[k] >= 0 else False) for k in ks])
        self.W_var = part.W[:, self.vk].contiguous()                         # (N, Jv)
        self.inv_rot = part.inv_rot[self.vk]                                 # (Jv, 3, 3)
        self.inv_trans = part.inv_trans[self.vk]
        self.rest_verts = part.rest_verts[:, None, :]                        # (N, 1, 3)
        self.rest_normals = part.rest_normals[:, None, :]
        self.A, self.b, self.R = part.A, part.b, part.R
        self.vpos = vpos

    def __call__(self, local_opt: torch.Tensor, root_loc: torch.Tensor):
        """Key-vertex world positions and unit normals, each (T, N, 3).

        local_opt: (Jo, T, 3, 3) local rotations (rest · basis) of the optimised bones; root_loc (T, 3) hips
        basis location.
        """
        lo = local_opt.unbind(0)
        g_rot = [None] * len(self.vk)
        g_pos = [None] * len(self.vk)
        root_lp = root_loc @ self.root_rest_rot.T + self.root_rest_trans    # (T, 3)
        for level in self.levels:
            PR, PP, LR, LP = [], [], [], []
            for a, p, p_var in level:
                k = self.vk[a]
                LR.append(lo[self.opt_slot[a]] if self.opt_slot[a] >= 0 else self.Lc_rot[k])
                LP.append(root_lp if a == self.root_slot else self.Lc_pos[k])
                if p < 0:
                    PR.append(None)
                elif p_var:
                    PR.append(g_rot[self.vpos[p]])
                    PP.append(g_pos[self.vpos[p]])
                else:
                    PR.append(self.Gc_rot[p])
                    PP.append(self.Gc_pos[p])
            if PR[0] is None:   # tree roots (no parent): global = local
                for (a, _, _), r, q in zip(level, LR, LP):
                    g_rot[a], g_pos[a] = r, q
                continue
            PRs, LRs = torch.stack(PR), torch.stack(LR)
            GR = PRs @ LRs
            GP = (PRs @ torch.stack(LP)[..., None])[..., 0] + torch.stack(PP)
            for (a, _, _), r, q in zip(level, GR.unbind(0), GP.unbind(0)):
                g_rot[a], g_pos[a] = r, q
        G_rot, G_pos = torch.stack(g_rot), torch.stack(g_pos)               # (Jv, T, 3, 3), (Jv, T, 3)
        S_rot = G_rot @ self.inv_rot[:, None]
        S_t = (G_rot @ self.inv_trans[:, None, :, None])[..., 0] + G_pos
        S = torch.cat([S_rot.flatten(-2), S_t], -1)                          # (Jv, T, 12)
        Jv, T = S.shape[:2]
        B = (self.W_var @ S.reshape(Jv, T * 12)).reshape(-1, T, 12)          # (N, T, 12)
        if self.B_const is not None:
            B = B + self.B_const
        Rb = B[..., :9].unflatten(-1, (3, 3))
        p = (Rb * self.rest_verts[..., None, :]).sum(-1) + B[..., 9:]
        n = (Rb * self.rest_normals[..., None, :]).sum(-1)
        n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        p = (p @ self.A.T + self.b).transpose(0, 1).contiguous()
        n = (n @ self.R.T).transpose(0, 1).contiguous()
        return p, n


class _Adam:
    """Adam (Kingma & Ba; the same update as ``torch.optim.Adam`` without weight decay or amsgrad).

    Written out because the first ``torch.optim.Adam`` of a process imports torch._dynamo (2-3 s on a
    2-core CPU), which would be paid by the first solve of every Blender session.
    """

    def __init__(self, params, lrs, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lrs = list(params), list(lrs)
        self.b1, self.b2 = betas
        self.eps = eps
        self.t = 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self):
        self.t += 1
        bc1 = 1.0 - self.b1 ** self.t
        bc2 = math.sqrt(1.0 - self.b2 ** self.t)
        for p, m, v, lr in zip(self.params, self.m, self.v, self.lrs):
            if p.grad is None:
                continue
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1.0 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1.0 - self.b2)
            denom = (v.sqrt() / bc2).add_(self.eps)
            p.addcdiv_(m, denom, value=-lr / bc1)


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
        self.num_keyverts = self.rig.num_keyverts
        # sole points: floor-barrier-only vertices evaluated with the key vertices (docs/solver.md "Ground")
        self._sole_side_list = []
        self.sole_ids = self._sole_vertices(tgt, self.init_motion) if s.sole_points > 0 else np.zeros(0, np.int64)
        self.sole_side = (np.concatenate(self._sole_side_list) if self._sole_side_list
                          else np.zeros(0, np.int64))                                 # (S,) 0 left, 1 right
        if len(self.sole_ids):
            from .descriptors import _CharacterPart
            from .types import KeyVertexSet
            kv = tgt.keyverts
            S = len(self.sole_ids)
            ext = replace(tgt, keyverts=KeyVertexSet(
                tuple(kv.names) + tuple(f"_sole_{k}" for k in range(S)), tuple(kv.limbs) + ("sole",) * S,
                np.concatenate([kv.vertex_ids, self.sole_ids]), np.concatenate([kv.locked, np.zeros(S, bool)]),
                kv.eye))
            part = _CharacterPart(ext, dt, dev, [self.root_idx])
        else:
            part = self.rig.parts[0]
        self.part = part
        self.stats["sole_points"] = int(len(self.sole_ids))
        self.h_src = float(src.height)
        self.h_tgt = float(tgt.height)

        # source descriptors (fixed)
        with torch.no_grad():  # only the bones the source key vertices depend on
            sn = self.src_rig.parts[0].needed
            srot = quat_to_matrix(torch.as_tensor(self.source_motion.rotations[:, sn], dtype=dt, device=dev))
            sloc = torch.as_tensor(self.source_motion.locations[:, sn], dtype=dt, device=dev)
            self.src_p, self.src_n = self.src_rig.parts[0].keyverts_needed(srot, sloc)
        #: float, or (T,) float64 per frame (source_ground="track" or a sequence)
        self.source_ground_level = ground_levels(src, self.source_motion, s.source_ground)
        g = np.asarray(self.source_ground_level)
        self.stats["source_ground"] = float(g.mean())
        self.stats["source_ground_drift"] = float(g.max() - g.min())
        src_ground = (torch.as_tensor(g[:, None], dtype=dt, device=dev) if g.ndim else float(g))
        self.src_h = height(self.src_p, src_ground)
        self.src_vel = sliding(self.src_p, self.fps)
        self.wf_src = floor_weight(self.src_h, MIN_FRACTION * self.h_src, MAX_FRACTION * self.h_src)
        # what the target's heights / horizontal velocities are compared with (docs/solver.md "Scaling")
        ratio = self.h_tgt / self.h_src if s.scale_floor_terms else 1.0
        # what the target's heights are compared with (docs/solver.md "Floor terms")
        # a source vertex under the floor is matched at floor level: its penetration is not copied
        self.src_h_cmp = (self.src_h.clamp(min=0.0) if s.clamp_source_height else self.src_h) * ratio
        self.src_vel_cmp = self.src_vel * ratio
        # foot contact and foot lock, from the source's own sole points (docs/solver.md)
        self.contact_w = None
        self.height_match_w = None
        self.lock_w = None
        if ((s.foot_contact or s.foot_lock > 0) and src.mesh is not None and len(self.sole_ids)
                and set(self.sole_side.tolist()) == {0, 1}):
            self._sole_side_list = []
            src_ids = self._sole_vertices(src, self.source_motion)      # the source's own sole points
            src_side = np.concatenate(self._sole_side_list) if self._sole_side_list else np.zeros(0, np.int64)
            self._sole_side_list = []
            low, vel = self._foot_track(src, self.source_motion, self.source_ground_level,
                                        [src_ids[src_side == k] for k in (0, 1)], self.fps)  # (T,2), (T,2,2)
            speed = np.linalg.norm(vel, axis=-1)                                                  # (T, 2)
            self._sole_side_t = torch.as_tensor(self.sole_side, device=dev)
            if s.foot_contact:
                self._setup_contact(low, ratio)
            # foot lock (docs/solver.md "Foot lock"): where the source's lowest foot point stands still near
            # its floor, the target's sole points near the floor must not slide
            if s.foot_lock > 0:
                lo_, hi_ = (float(x) * self.h_src for x in s.lock_band)
                lk = np.clip(1.0 - (speed - lo_) / max(hi_ - lo_, 1e-12), 0.0, 1.0)
                near = np.nan_to_num(np.abs(low), nan=np.inf) <= MAX_FRACTION * self.h_src
                lk = np.where(near & np.isfinite(speed), lk, 0.0)                                # (T, 2)
                self.lock_w = torch.as_tensor(lk, dtype=dt, device=dev)                          # (T, 2)
                self.lock_vel = torch.as_tensor(np.nan_to_num(vel) * ratio, dtype=dt, device=dev)  # (T, 2, 2)
                lo, hi = window_bounds(T, self.fps, LOCK_WINDOW_S)
                self._lock_lo = torch.as_tensor(lo, device=dev)
                self._lock_hi = torch.as_tensor(hi, device=dev)
                self._lock_dt = torch.as_tensor(np.maximum(hi - lo, 1) / self.fps, dtype=dt, device=dev)
        self.stats["contact_frames"] = 0 if self.contact_w is None else float(self.contact_w.sum())
        self.stats["locked_frames"] = 0 if self.lock_w is None else float(self.lock_w.sum())

        # target variables
        canon = _canonical_of(tgt)
        wanted = set(CORE_BONES) | (set(FINGER_BONES) if s.optimise_fingers else set())
        # bones that move no key vertex cannot change the objective: they keep the initial motion
        opt = sorted(j for j, c in canon.items() if c in wanted and j in part.position)
        if self.root_idx not in opt:
            opt = sorted(opt + [self.root_idx])
        self.opt_idx = torch.as_tensor(opt, device=dev)
        self.opt_parts = [limb_of(canon[j]) if j in canon else "torso" for j in opt]
        # channels of the bones the rig evaluates (T, Jn, ...), and where the optimised ones sit among them
        R0 = quat_to_matrix(torch.as_tensor(self.init_motion.rotations[:, part.needed], dtype=torch.float64))
        self.R_init_n = R0.to(dt).to(dev)                   # (T, Jn, 3, 3)
        self.opt_pos = torch.as_tensor([part.position[j] for j in opt], device=dev)
        self.R_init_opt = self.R_init_n[:, self.opt_pos]    # (T, Jo, 3, 3)
        self.L_init = torch.as_tensor(self.init_motion.locations, dtype=dt, device=dev)
        self.L_init_n = self.L_init[:, part.needed_t]
        self.root_pos = torch.as_tensor([part.position[self.root_idx]], device=dev)
        self.root_jac_inv = self._root_jacobian_inverse().to(dt).to(dev)  # (T, 3, 3) world -> basis
        self.chain = _OptChain(part, self.R_init_n, self.L_init_n, self.opt_pos.tolist(),
                               int(self.root_pos[0]))
        self.RR_opt = (part.rest_rot[self.opt_pos][:, None] @ self.R_init_opt.transpose(0, 1)).contiguous()  # (Jo,T,3,3)
        basis = bspline_basis(T, s.knot_spacing * self.fps)
        self._basis_np = basis
        self.num_controls = basis.shape[1]
        if basis.shape[0] == basis.shape[1] and np.array_equal(basis, np.eye(T)):
            self.band = None
        else:   # the 4 non-zero entries of each row, in column order
            cols = np.argsort(basis == 0, axis=1, kind="stable")[:, :4]
            cols.sort(axis=1)
            vals = np.take_along_axis(basis, cols, 1)
            self.band = (torch.as_tensor(cols.T.copy(), device=dev), torch.as_tensor(vals, dtype=dt, device=dev))
        C = self.num_controls
        self.delta = torch.zeros((C, len(opt), 6), dtype=dt, device=dev)    # 6D residual controls
        self.root_off = torch.zeros((C, 3), dtype=dt, device=dev)           # world offset / h_tgt
        if self.warm_start is not None:
            self._init_from(self.warm_start)
        self.delta.requires_grad_(True)
        self.root_off.requires_grad_(True)

        self.identity6 = torch.as_tensor(_IDENTITY_6D, dtype=dt, device=dev)
        self._xy_mask = torch.as_tensor([1.0, 1.0, 0.0], dtype=dt, device=dev)
        with torch.no_grad():  # through the same path as the solve, so zero residuals give exactly p_init
            zero = (torch.zeros((T, len(opt), 6), dtype=dt, device=dev), torch.zeros((T, 3), dtype=dt, device=dev))
            self.p_init, self.n_init = self._forward(zero)
            self.sole_init = self._sole_p
            if self.contact_w is not None:   # foot key vertices above their foot's lowest point, copy-rot
                self.foot_rel_init = self._foot_relative(self.p_init[..., 2], self._sole_lows(self.sole_init))
            self.jerk_init = jerk(self.p_init, self.fps) if T >= 4 else None
        if s.smooth_mode not in ("added", "absolute"):
            raise CoreError(f"smooth_mode must be 'added' or 'absolute', not '{s.smooth_mode}'.")

        # per-term per-key-vertex multipliers from part overrides
        self.vertex_scale = self._vertex_scales()
        if self.warm_start is None and s.root_init == "feet" and T >= 2:
            self._init_root_from_feet()
        elif s.root_init not in ("feet", "copy"):
            raise CoreError(f"root_init must be 'feet' or 'copy', not '{s.root_init}'.")

        # sparse pairs
        mask = allowed_pairs(self.rig.limbs, None, s.exclude_same_limb)
        self.pairs = ActivePairs(self.src_p, self.src_n, self.src_rig.heights[self.src_rig.character],
                                 self.rig.heights[self.rig.character], mask)
        self._last_entries = 0
        self.stats["source_pair_entries"] = self.pairs.num_source_entries
        self.stats["pairs_allowed"] = int(mask.sum())
        self.stats["frames"] = T

        # balancing scales from the initial state (α = 0)
        with torch.no_grad():
            self._init_pairs = self.pairs.active(None, 0.0)
            raw = self._raw_terms(self.p_init, self.n_init, alpha=0.0, pairset=self._init_pairs,
                                  sole=self.sole_init)
        self.scales = self._reference_scales(raw)
        self.stats["initial_raw"] = {k: float(v) for k, v in raw.items()}
        self.stats["scales"] = dict(self.scales)

        lr_root = s.lr_root  # root offset is stored in units of h_tgt
        self.optim = _Adam([self.delta, self.root_off], [s.lr_rot, lr_root], eps=s.adam_eps)
        self.base_lrs = [s.lr_rot, lr_root]
        self._ready = True

    def _setup_contact(self, low: np.ndarray, ratio: float):
        """Foot contact weights from the source's lowest sole point heights ``low`` (T, 2) (docs/solver.md
        "Foot contact"): where the source's foot is grounded (within the grounded band), the target's lowest
        sole point is matched to the source's and that foot's key vertices are not matched to the source's raw
        heights (bodies differ in how far a key vertex sits above the sole) but to copy-rotations' heights
        above the foot's lowest sole point."""
        dt, dev, tgt = self.dtype, self.device, self.target
        T = self.num_frames
        # matched not below the floor, scaled like the other heights; a source foot sunk deeper than the band
        # is not taken as standing on this floor (its clip's ground lies elsewhere)
        self.contact_h = torch.as_tensor(np.nan_to_num(np.clip(low, 0.0, None)) * ratio, dtype=dt,
                                         device=dev)                                      # (T, 2)
        low = np.nan_to_num(np.abs(low), nan=np.inf)
        lo_, hi_ = (float(x) * self.h_src for x in self.settings.contact_band)
        g = np.clip(1.0 - (low - lo_) / max(hi_ - lo_, 1e-12), 0.0, 1.0)
        self.contact_w = torch.as_tensor(g, dtype=dt, device=dev)                            # (T, 2)
        dom = tgt.mesh.dominant_bones()[np.asarray(tgt.keyverts.vertex_ids)]
        foot_of = np.full(len(dom), -1)
        for k, side in enumerate(("left", "right")):
            bones = [tgt.skeleton.index(tgt.bone_map[c]) for c in (f"{side}_foot", f"{side}_toes")
                     if tgt.bone_map.get(c) in tgt.skeleton.names]
            foot_of[np.isin(dom, bones)] = k
        m = np.ones((T, len(dom)))
        for k in (0, 1):
            m[:, foot_of == k] = 1.0 - g[:, k:k + 1]
        self.height_match_w = torch.as_tensor(m, dtype=dt, device=dev)                       # (T, N)
        self._foot_of = torch.as_tensor(foot_of, device=dev)                                   # (N,) -1/0/1

    def _sole_vertices(self, character: Character, motion: Motion, max_frames: int = 400,
                       max_vertices: int = 300) -> np.ndarray:
        """Up to ``settings.sole_points`` mesh vertices per foot that carry it on the ground over ``motion``
        (heel, ball, toe and the sole's outline): ``_spread_sole_points`` on ``max_frames`` sampled frames."""
        from .skinning import world_vertices
        sk, mesh = character.skeleton, character.mesh
        dom = mesh.dominant_bones()
        band = SOLE_BAND * float(character.height) if character.height else SOLE_BAND * 1.7
        T = motion.num_frames
        frames = np.unique(np.linspace(0, T - 1, min(T, max_frames)).round().astype(np.int64))
        feet = {}
        for side in ("left", "right"):
            bones = [sk.index(character.bone_map[c]) for c in (f"{side}_foot", f"{side}_toes")
                     if character.bone_map.get(c) in sk.names]
            ids = np.nonzero(np.isin(dom, bones))[0]
            if len(ids) > max_vertices:
                ids = ids[np.linspace(0, len(ids) - 1, max_vertices).round().astype(np.int64)]
            if len(ids):
                feet[side] = ids
        if not feet:
            return np.zeros(0, np.int64)
        _, p = next(world_vertices(character, motion, np.concatenate(list(feet.values())), frames,
                                   chunk=len(frames)))
        z_all = p[..., 2].numpy()                                                # (F, V of both feet)
        out, start = [], 0
        for side, ids in feet.items():
            z = z_all[:, start:start + len(ids)]
            start += len(ids)
            keep = _spread_sole_points(z, mesh.rest_verts[ids], band, self.settings.sole_points)
            out.append(ids[keep])
            self._sole_side_list.append(np.full(len(keep), 0 if side == "left" else 1, np.int64))
        return np.concatenate(out)

    @staticmethod
    def _foot_track(character: Character, motion: Motion, ground, sides, fps: float,
                    chunk: int = 512) -> tuple:
        """Each foot's lowest point among ``sides`` = (left ids, right ids) (its sole points).

        Returns its height above ``ground`` (a level, or (T,) levels per frame) (T, 2; the soft minimum of
        ``_sole_lows``) and its horizontal velocity (T, 2, 2, m/s): that frame's lowest vertex followed over
        a centred window of LOCK_WINDOW_S (k = max(1, round(fps · LOCK_WINDOW_S / 2)) frames each side,
        clamped at the clip's ends: the foot-locked metric's estimator). NaN for a foot without vertices."""
        from .skinning import world_vertices
        T = motion.num_frames
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in sides])
        allp = np.zeros((T, len(ids), 3))
        if len(ids):
            for fr, p in world_vertices(character, motion, ids, chunk=chunk):
                allp[fr] = p.numpy()
        pts = np.split(allp, np.cumsum([len(s) for s in sides])[:-1], axis=1)   # per foot (T, V_k, 3)
        low = np.full((T, 2), np.nan)
        vel = np.full((T, 2, 2), np.nan)
        tau = SOFT_LOW * float(character.height) if character.height else SOFT_LOW * 1.7
        g = np.asarray(ground, dtype=np.float64)
        g = g[:, None] if g.ndim else g
        lo, hi = window_bounds(T, fps, LOCK_WINDOW_S)
        for k, P in enumerate(pts):
            if P.shape[1] == 0:
                continue
            v = P[..., 2].argmin(-1)                                          # (T,) lowest sole point
            z = -(P[..., 2] - g) / tau                                        # soft minimum, as _sole_lows
            zm = z.max(-1)
            low[:, k] = -tau * (zm + np.log(np.exp(z - zm[:, None]).sum(-1)))
            d = P[hi, v, :2] - P[lo, v, :2]
            vel[:, k] = d / np.maximum(hi - lo, 1)[:, None] * fps
        return low, vel

    def _init_root_from_feet(self):
        """Start the horizontal root trajectory where the source's planted feet stay planted.

        Per frame step t -> t+1, the horizontal root velocity is corrected by the W_floor-weighted mean of
        (source velocity − copy-rotations velocity) of the key vertices (the velocity L_sliding compares);
        integrated over time this is an offset o(t) (held where no key vertex is near the floor), fitted to the
        B-spline controls as a weighted average (quasi-interpolation). Copy-rotations' walk speed follows the
        hip-height ratio, so a target with another stride slides; this removes most of it before the first
        step instead of asking Adam to move every root control by tens of centimetres.
        """
        with torch.no_grad():
            vt = sliding(self.p_init, self.fps)                               # (T-1, N, 2)
            w = self.wf_src[:-1]                                              # (T-1, N)
            wsum = w.sum(-1, keepdim=True)
            dv = (w[..., None] * (self.src_vel_cmp - vt)).sum(1) / wsum.clamp_min(1e-6)
            dv = torch.where(wsum > 1e-3, dv, torch.zeros_like(dv))
            o = torch.cat([torch.zeros_like(dv[:1]), torch.cumsum(dv, 0) / self.fps], 0)   # (T, 2) metres
            if self.band is None:
                ctrl = o
            else:
                idx, bw = self.band
                num = torch.zeros((self.num_controls, 2), dtype=o.dtype, device=o.device)
                den = torch.zeros((self.num_controls, 1), dtype=o.dtype, device=o.device)
                for m in range(4):
                    num.index_add_(0, idx[m], bw[:, m:m + 1] * o)
                    den.index_add_(0, idx[m], bw[:, m:m + 1])
                ctrl = num / den.clamp_min(1e-9)
            self.root_off[:, :2] = ctrl / self.h_tgt
        self.stats["root_init_shift_max_m"] = float(o.norm(dim=-1).max())

    def _root_jacobian_inverse(self) -> torch.Tensor:
        """(T, 3, 3) map from a world-space offset of the hips head to its basis location (per frame)."""
        sk = self.target.skeleton
        r = self.root_idx
        p = sk.parents[r]
        A = sk.object_matrix[:3, :3]
        rest_rot = sk.rest_local[r, :3, :3]
        if p < 0:
            Jm = np.broadcast_to(A @ rest_rot, (self.num_frames, 3, 3))
        else:
            chain = []
            while p >= 0:   # the hips' ancestors, root first; only their rotations matter
                chain.insert(0, p)
                p = sk.parents[p]
            Gp = np.broadcast_to(np.eye(3), (self.num_frames, 3, 3))
            for a in chain:
                Ra = quat_to_matrix(np.asarray(self.init_motion.rotations[:, a], dtype=np.float64))
                Gp = Gp @ sk.rest_local[a, :3, :3] @ Ra
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
        pinv = torch.linalg.pinv(torch.as_tensor(self._basis_np))
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
        s = self.settings
        h = self.h_tgt
        T, N = self.p_init.shape[:2]
        ps = self._init_pairs
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
            "sliding": wf2 * (s.sliding_floor * h) ** 2,      # foot sliding, h_c / s
        }
        out = {}
        with torch.no_grad():
            raw = dict(raw, smooth=float(smooth_loss(self.p_init, self.fps)))  # absolute initial jerk
        for k in TERMS:
            init = 0.0 if k == "reg" else float(raw[k])
            out[k] = max(init, floors[k], 1e-12)
        # floor barrier: fixed scale, "1" = one point per frame 1 % h_c below the floor
        out["floor"] = T * ref ** 2
        if "lock" in raw:   # foot lock: its initial value, floored at 0.5 % h_c / s on every locked point
            w = float(self.lock_w.sum()) * max(int((self._sole_side_t == 0).sum()), 1)
            out["lock"] = max(float(raw["lock"]), w * (0.005 * h) ** 2, 1e-12)
        return out

    # -- forward ----------------------------------------------------------------------------------------

    def frame_residuals(self):
        """Per-frame 6D residuals (T, Jo, 6) and root offsets (T, 3) from the control points."""
        C, Jo = self.delta.shape[:2]
        return self._spline(self.delta.reshape(C, Jo * 6)).reshape(-1, Jo, 6), self._spline(self.root_off)

    def _spline(self, ctrl: torch.Tensor) -> torch.Tensor:
        """(C, K) control points -> (T, K) per-frame values (banded B-spline: 4 controls per frame)."""
        if self.band is None:
            return ctrl
        idx, w = self.band
        out = w[:, 0:1] * ctrl.index_select(0, idx[0])
        for m in range(1, 4):
            out = out + w[:, m:m + 1] * ctrl.index_select(0, idx[m])
        return out

    def _opt_channels(self, residuals=None):
        """Current (T, Jo, 3, 3) rotations of the optimised bones and (T, 3) hips basis location."""
        d, off = self.frame_residuals() if residuals is None else residuals
        R = self.R_init_opt @ sixd_to_matrix(self.identity6 + d)
        loc = self.L_init[:, self.root_idx] + (self.root_jac_inv @ off[..., None])[..., 0]
        return R, loc

    def _forward(self, residuals=None):
        """Key-vertex positions and normals (T, N, 3) at the current variables (or at ``residuals``)."""
        d, off = self.frame_residuals() if residuals is None else residuals
        M = sixd_to_matrix(self.identity6 + d.transpose(0, 1))             # (Jo, T, 3, 3)
        loc = self.L_init[:, self.root_idx] + (self.root_jac_inv @ off[..., None])[..., 0]
        self._root_world = off * self.h_tgt                                  # (T, 3) world offset of the hips
        p, n = self.chain(self.RR_opt @ M, loc)
        N = self.num_keyverts
        self._sole_p = p[:, N:] if p.shape[1] > N else None                 # (T, S, 3) sole points
        return (p[:, :N], n[:, :N]) if p.shape[1] > N else (p, n)

    def _sole_lows(self, sole) -> torch.Tensor:
        """Height of each foot's lowest sole point (T, 2) from sole points (T, S, 3): a soft minimum
        (temperature SOFT_LOW × h_c), so that on a flat sole, where several points are nearly as low, the
        gradient is shared instead of jumping from one point to the next (``_foot_track`` uses the same)."""
        hs = height(sole, self.settings.terrain if self.settings.terrain is not None else 0.0)
        tau = SOFT_LOW * self.h_tgt
        big = torch.finfo(hs.dtype).max
        return torch.stack([-tau * torch.logsumexp(torch.where(self._sole_side_t == k, -hs / tau, -big), -1)
                            for k in (0, 1)], -1)

    def _foot_relative(self, h, lows) -> torch.Tensor:
        """Heights (T, N) of the key vertices above their own foot's lowest sole point (0 off the feet)."""
        idx = self._foot_of.clamp(min=0)
        rel = h - lows.index_select(1, idx)
        return torch.where(self._foot_of >= 0, rel, torch.zeros_like(rel))

    def _lock_loss(self, sole) -> torch.Tensor:
        """Foot lock: Σ over frames and sole points of lock weight × |horizontal velocity − the source foot's|²
        (m²/s²; the source's lowest foot point's velocity, scaled like L_sliding's: nearly 0 where it is locked).

        sole: (T, S, 3) sole points. The velocity is the mean over LOCK_WINDOW_S (central difference, as the
        source's speed), which ignores the capture jitter that a smooth residual cannot remove anyway. A point
        counts where it is within 1 % h_c of its foot's lowest sole point (the part of the sole that carries
        the weight; stop-gradient), times the source foot's lock weight."""
        ht = self.h_tgt
        hs = height(sole, self.settings.terrain if self.settings.terrain is not None else 0.0)   # (T, S)
        side = self._sole_side_t
        with torch.no_grad():
            lows = self._sole_lows(sole)                                                        # (T, 2)
            rho = (1.0 - (hs - lows.index_select(1, side)) / (0.01 * ht)).clamp(0.0, 1.0)
            w = self.lock_w.index_select(1, side) * rho                                         # (T, S)
        d = sole.index_select(0, self._lock_hi)[..., :2] - sole.index_select(0, self._lock_lo)[..., :2]
        v = d / self._lock_dt[:, None, None] - self.lock_vel.index_select(1, side)              # (T, S, 2)
        return (w * v.square().sum(-1)).sum()

    def _raw_terms(self, p, n, alpha: float, pairset, sole=None) -> dict:
        """Unweighted, unnormalised terms at positions p (T, N, 3), normals n (T, N, 3), sole points
        (T, S, 3) or None."""
        s = self.settings
        vs = self.vertex_scale
        ht = self.h_tgt
        out = {}
        if s.reg_free_root_xy:   # the horizontal root trajectory is not tied to copy-rotations' one
            shift = self._root_world * self._xy_mask
            out["reg"] = reg_loss(p - shift[:, None, :], self.p_init, vs["reg"])
        else:
            out["reg"] = reg_loss(p, self.p_init, vs["reg"])
        ref = self.jerk_init if self.settings.smooth_mode == "added" else None
        # ε: a 10 µm third difference, far below float32 noise of visible motion yet above round-off
        out["smooth"] = smooth_loss(p, self.fps, vs["smooth"], eps=1e-5 * self.fps ** 3, reference=ref)
        # height & sliding (dense over key vertices: (T, N))
        h = height(p, s.terrain if s.terrain is not None else 0.0)
        wf = self.wf_src + alpha * floor_weight(h, MIN_FRACTION * ht, MAX_FRACTION * ht).detach()
        # L_height = floor barrier + W_floor-weighted match; the barrier (key vertices and sole points) is
        # balanced on its own scale (docs/solver.md "Balancing") and reported inside 'height'
        wh = wf if self.height_match_w is None else wf * self.height_match_w
        out["height"] = height_loss(h, self.src_h_cmp, wh, vs["height"]) - floor_barrier(h, vs["height"])
        out["floor"] = floor_barrier(h, vs["height"])
        if sole is not None:
            hs = height(sole, s.terrain if s.terrain is not None else 0.0)                 # (T, S)
            out["floor"] = out["floor"] + floor_barrier(hs)
            if self.contact_w is not None:   # lowest sole point of a grounded foot: the source's height
                lows = self._sole_lows(sole)                                                # (T, 2)
                out["floor"] = out["floor"] + (self.contact_w * (lows - self.contact_h)).square().sum()
                # the foot's shape above that point stays the copy-rotations one (where the match is relaxed)
                rel = self._foot_relative(h, lows)
                gk = 1.0 - self.height_match_w
                r2 = (gk * (rel - self.foot_rel_init)).square()
                out["height"] = out["height"] + (r2 if vs["height"] is None else r2 * vs["height"]).sum()
        vel = sliding(p, self.fps)
        out["sliding"] = sliding_loss(vel, self.src_vel_cmp, wf[:-1], vs["sliding"])
        if self.lock_w is not None and sole is not None and sole.shape[0] > 1:
            out["lock"] = self._lock_loss(sole)
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
        if pairset is None:
            pairset = self.pairs.active(p, alpha)
            self._last_entries = len(pairset)
        raw = self._raw_terms(p, n, alpha, pairset, self._sole_p)
        out = {k: self.settings.weight(k) * raw[k] / self.scales[k] for k in TERMS}
        out["height"] = out["height"] + self.settings.weight("height") * raw["floor"] / self.scales["floor"]
        if "lock" in raw:   # reported inside 'sliding' (both are about feet sliding)
            out["sliding"] = out["sliding"] + (self.settings.weight("sliding") * self.settings.foot_lock
                                               * raw["lock"] / self.scales["lock"])
        return out

    def _adam_step(self) -> Progress:
        s = self.settings
        step = self._step
        # cosine decay of the learning rates to lr_final
        c = 0.5 * (1 + math.cos(math.pi * step / max(self.total - 1, 1)))
        warm = min(1.0, (step + 1) / max(1.0, s.warmup * self.total))
        self.optim.lrs = [base * warm * (s.lr_final + (1 - s.lr_final) * c) for base in self.base_lrs]
        prev = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            self.delta.grad = self.root_off.grad = None
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
        self.stats["pair_entries_last"] = self._last_entries
        self._step += 1
        return Progress(self._step / self.total, step, self.total, float(loss.detach()), vals)
