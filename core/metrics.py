"""Quality metrics of a retargeted clip against its source (method.md §1.8). Definitions: docs/metrics.md.

``evaluate(source, source_motion, target, target_motion)`` returns a flat dict of floats. Every per-frame
quantity is computed for both characters in one chunked skinning pass over their full meshes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .errors import CoreError
from .humanoid import CORE_BONES
from .kinematics import ForwardKinematics
from .rotations import quat_to_matrix
from .skinning import SkinningMatrices, skin_vertices
from .types import Character, Motion

GROUNDED_FRACTION = 0.01     #: grounded: |foot height| <= 1 % of h_c
LOCKED_FRACTION = 0.01       #: locked: windowed horizontal foot speed < 1 % of h_c per second (docs/metrics.md)
LOCKED_STRICT_FRACTION = 0.001  #: the paper's printed 0.1 % h_c / s, on the raw 1-frame speed (locked_strict_*)
CONTACT_FRACTION = 0.05      #: key-vertex contact: pair distance < d_min = 5 % of h_c
SELF_PEN_MAX_VERTICES = 4000  #: vertices sampled (uniform stride) for the self-penetration measure
SELF_PEN_CORE = 0.5          #: capsule radius = this × the median distance of a segment's vertices to its axis
SELF_PEN_HOPS = 2            #: segments this close in the canonical tree are not tested against each other
FOOT_MAX_VERTICES = 300      #: vertices per foot (uniform stride) searched for the lowest foot point
LOCK_WINDOW_S = 1.0 / 15.0   #: foot speed = mean speed over this window, centred (docs/metrics.md)
_CHUNK = 32


def vertex_areas(mesh) -> np.ndarray:
    """(V,) area weight of each vertex: Σ over its faces of area / vertex count (rest pose), summing to 1."""
    w = np.zeros(mesh.num_verts)
    v = mesh.rest_verts
    sizes = mesh.face_sizes
    starts = mesh.face_offsets[:-1]
    for n in np.unique(sizes):
        if n < 3:
            continue
        st = starts[sizes == n]
        idx = np.stack([mesh.face_indices[st + k] for k in range(n)], axis=1)  # (F_n, n)
        area = np.zeros(len(st))
        for k in range(1, n - 1):  # fan triangulation
            a, b, c = v[idx[:, 0]], v[idx[:, k]], v[idx[:, k + 1]]
            area += 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
        np.add.at(w, idx.ravel(), np.repeat(area / n, n))
    total = w.sum()
    if total <= 0:
        return np.full(mesh.num_verts, 1.0 / mesh.num_verts)
    return w / total


def _segment_of_vertices(character: Character) -> tuple:
    """Canonical core bone of each vertex (its dominant bone or the nearest mapped core ancestor).

    Returns (seg (V,) int index into ``bones`` or -1, bones list of canonical names, bone indices).
    """
    sk, mesh = character.skeleton, character.mesh
    canon = {}
    for c, b in character.bone_map.items():
        if c in CORE_BONES and b in sk.names:
            canon[sk.index(b)] = c
    bones = sorted(set(canon.values()), key=CORE_BONES.index)
    owner = np.full(sk.num_bones, -1)
    for j in range(sk.num_bones):
        k = j
        while k >= 0 and k not in canon:
            k = sk.parents[k]
        owner[j] = bones.index(canon[k]) if k >= 0 else -1
    return owner[mesh.dominant_bones()], bones, [sk.index(character.bone_map[c]) for c in bones]


class _Capsules(NamedTuple):
    bone: np.ndarray    # (B,) skeleton bone index carrying the capsule
    a: np.ndarray       # (B, 3) segment start in that bone's rest frame
    b: np.ndarray       # (B, 3) segment end in that bone's rest frame
    radius: np.ndarray  # (B,)
    excluded: np.ndarray  # (B, B) capsule c is not tested against vertices of segment s


def _capsules(character: Character, seg: np.ndarray, bones: list, bone_ids: list) -> _Capsules:
    """One capsule per canonical segment, fitted in the rest pose to the vertices it owns.

    Axis: the bone's Y axis (head to tail), spanning the owned vertices' extent along it; radius: the median
    distance of the owned vertices to that axis segment. Capsules of the same, parent and child segments are
    not tested against each other.
    """
    sk, mesh = character.skeleton, character.mesh
    G = sk.rest_global
    B = len(bones)
    a = np.zeros((B, 3))
    b = np.zeros((B, 3))
    r = np.zeros(B)
    for s in range(B):
        v = mesh.rest_verts[seg == s]
        if len(v) < 4:
            r[s] = 0.0
            continue
        inv = np.linalg.inv(G[bone_ids[s]])
        loc = v @ inv[:3, :3].T + inv[:3, 3]
        lo, hi = np.percentile(loc[:, 1], [5, 95])
        a[s] = (0, lo, 0)
        b[s] = (0, hi, 0)
        yy = np.clip(loc[:, 1], lo, hi)
        d = np.linalg.norm(loc - np.stack([np.zeros_like(yy), yy, np.zeros_like(yy)], 1), axis=1)
        r[s] = SELF_PEN_CORE * np.median(d)
    from .humanoid import CANONICAL_PARENT
    par = np.full(B, -1)
    for s, c in enumerate(bones):
        p = CANONICAL_PARENT.get(c)
        while p is not None and p not in bones:
            p = CANONICAL_PARENT.get(p)
        if p is not None:
            par[s] = bones.index(p)
    # segments within SELF_PEN_HOPS of each other in the (mapped) canonical tree share a skinned joint region
    adj = np.eye(B, dtype=bool)
    for s in range(B):
        if par[s] >= 0:
            adj[s, par[s]] = adj[par[s], s] = True
    excl = np.eye(B, dtype=bool)
    reach = np.eye(B, dtype=bool)
    for _ in range(SELF_PEN_HOPS):
        reach = (reach.astype(np.int64) @ adj.astype(np.int64)) > 0
        excl |= reach
    return _Capsules(np.asarray(bone_ids), a, b, r, excl)


def _point_segment_dist(p, a, b):
    """p (..., V, 1, 3) vs segments a, b (..., 1, B, 3) -> (..., V, B)."""
    ab = b - a
    t = ((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)
    t = t.clamp(0, 1)
    return (p - (a + t[..., None] * ab)).norm(dim=-1)


class _Track(NamedTuple):
    joints: np.ndarray       # (T, Jc, 3) world positions of the mapped core bones
    floor_share: np.ndarray  # (T,) area share below ground
    self_share: np.ndarray   # (T,) area share inside a foreign capsule
    foot_height: np.ndarray  # (2, T) lowest foot point height above ground (left, right)
    foot_speed: np.ndarray   # (2, T - 1) horizontal speed of the lowest foot vertex of frame t (t -> t+1)
    keyverts: np.ndarray     # (T, N, 3) or None
    foot_verts: list         # per foot, (T, F, 3) world positions of its (subsampled) vertices
    foot_low: list           # per foot, (T,) index (into foot_verts) of the lowest one
    joint_names: list        # (Jc,) canonical names of the ``joints`` columns


def _ground_of(ground, x, y, frames=None):
    """Ground height under world (x, y) (B, ...) of the frames ``frames`` (a slice of the clip): ``ground`` is
    a level, a (T,) array of levels per frame, or a callable f(x, y) (a HeightField)."""
    if callable(ground):
        return ground(x, y)
    g = np.asarray(ground, dtype=np.float64)
    if g.ndim == 0:
        return torch.full_like(x, float(g))
    g = torch.as_tensor(g[frames], dtype=x.dtype)
    return g.reshape((-1,) + (1,) * (x.dim() - 1)).expand_as(x)


def _track(character: Character, motion: Motion, ground=0.0, keyvert_ids=None) -> _Track:
    sk, mesh = character.skeleton, character.mesh
    if mesh is None:
        raise CoreError(f"Character '{character.name}' has no mesh: metrics need one (fit a body first).")
    if motion.rotations.shape[1] != sk.num_bones:
        raise CoreError(f"Motion does not match armature '{character.name}' ({sk.num_bones} bones).")
    dt = torch.float32
    fk = ForwardKinematics(sk, dt)
    sm = SkinningMatrices(sk, dt)
    A = torch.as_tensor(sk.object_matrix[:3, :3], dtype=dt)
    bvec = torch.as_tensor(sk.object_matrix[:3, 3], dtype=dt)
    area = torch.as_tensor(vertex_areas(mesh), dtype=dt)
    seg, bones, bone_ids = _segment_of_vertices(character)
    caps = _capsules(character, seg, bones, bone_ids)
    # self-penetration sample
    V = mesh.num_verts
    sample = np.arange(0, V, max(1, int(np.ceil(V / SELF_PEN_MAX_VERTICES))))
    sample = sample[seg[sample] >= 0]
    s_seg = seg[sample]
    s_area = area[torch.as_tensor(sample)]
    s_area = s_area / s_area.sum().clamp_min(1e-12)
    valid = torch.as_tensor(caps.radius > 0)
    test = ~torch.as_tensor(caps.excluded[s_seg]) & valid[None, :]  # (S, B)
    # vertices already inside a foreign capsule at rest are not counted (modelled contact, not penetration)
    Grest = torch.as_tensor(sk.rest_global, dtype=dt)
    ca = torch.as_tensor(caps.a, dtype=dt)
    cb = torch.as_tensor(caps.b, dtype=dt)
    rad = torch.as_tensor(caps.radius, dtype=dt)
    cbone = torch.as_tensor(caps.bone)

    def cap_world(Gr, Gp):  # Gr (..., J, 3, 3), Gp (..., J, 3) armature -> capsule ends in armature
        R = Gr[..., cbone, :, :]
        P = Gp[..., cbone, :]
        return (R @ ca[..., None])[..., 0] + P, (R @ cb[..., None])[..., 0] + P

    rv = torch.as_tensor(mesh.rest_verts[sample], dtype=dt)
    a0, b0 = cap_world(Grest[:, :3, :3], Grest[:, :3, 3])
    inside_rest = _point_segment_dist(rv[:, None, :], a0[None], b0[None]) < rad
    test &= ~inside_rest
    # feet
    feet = []
    for side in ("left", "right"):
        ids = [bones.index(c) for c in (f"{side}_foot", f"{side}_toes") if c in bones]
        fv = np.nonzero(np.isin(seg, ids))[0]
        if len(fv) == 0:
            raise CoreError(f"Character '{character.name}': no mesh vertices on its {side} foot; map "
                            f"{side}_foot in the bone map.")
        if len(fv) > FOOT_MAX_VERTICES:
            fv = fv[np.linspace(0, len(fv) - 1, FOOT_MAX_VERTICES).round().astype(np.int64)]
        feet.append(torch.as_tensor(fv))
    joint_ids = torch.as_tensor(bone_ids)
    kv = None if keyvert_ids is None else torch.as_tensor(np.asarray(keyvert_ids))

    T = motion.num_frames
    joints = np.zeros((T, len(bone_ids), 3))
    floor_share = np.zeros(T)
    self_share = np.zeros(T)
    foot_pts = [np.zeros((T, 3)), np.zeros((T, 3))]
    foot_next = [np.zeros((T, 3)), np.zeros((T, 3))]
    foot_low = [np.zeros(T, np.int64), np.zeros(T, np.int64)]
    kvs = None if kv is None else np.zeros((T, len(kv), 3))
    foot_verts = [np.zeros((T, len(f), 3), np.float32) for f in feet]
    foot_k = [np.zeros(T, np.int64), np.zeros(T, np.int64)]
    all_verts = torch.as_tensor(mesh.rest_verts, dtype=dt)
    with torch.no_grad():
        for s in range(0, T, _CHUNK):
            e = min(T, s + _CHUNK)
            rot = quat_to_matrix(torch.as_tensor(motion.rotations[s:e], dtype=dt))
            loc = torch.as_tensor(motion.locations[s:e], dtype=dt)
            pose = fk(rot, loc)
            r, t = sm(pose)
            verts, _ = skin_vertices(r, t, all_verts, mesh.weight_bones, mesh.weight_values)
            vw = verts @ A.T + bvec                                    # (B, V, 3) world
            hgt = vw[..., 2] - _ground_of(ground, vw[..., 0], vw[..., 1], slice(s, e))
            floor_share[s:e] = ((hgt < 0).to(dt) * area).sum(-1).numpy()
            pa, pb = cap_world(pose.rotations, pose.positions)          # armature space
            sv = verts[:, torch.as_tensor(sample)]
            inside = _point_segment_dist(sv[:, :, None, :], pa[:, None], pb[:, None]) < rad  # (B, S, Bc)
            pen = (inside & test[None]).any(-1)
            self_share[s:e] = (pen.to(dt) * s_area).sum(-1).numpy()
            joints[s:e] = (pose.positions[:, joint_ids] @ A.T + bvec).numpy()
            for f in range(2):
                fh = hgt[:, feet[f]]
                k = fh.argmin(dim=-1)
                foot_low[f][s:e] = feet[f][k].numpy()
                foot_k[f][s:e] = k.numpy()
                foot_verts[f][s:e] = vw[:, feet[f]].numpy()
            if kv is not None:
                kvs[s:e] = vw[:, kv].numpy()
            # positions of each frame's lowest foot vertex at that frame, and at the next frame (if in chunk)
            for f in range(2):
                ids = torch.as_tensor(foot_low[f][s:e])
                foot_pts[f][s:e] = vw[torch.arange(e - s), ids].numpy()
                if e - s > 1:
                    foot_next[f][s:e - 1] = vw[torch.arange(1, e - s), ids[:-1]].numpy()
            if s > 0:  # the previous chunk's last frame, tracked into this chunk's first frame
                for f in range(2):
                    foot_next[f][s - 1] = vw[0, int(foot_low[f][s - 1])].numpy()
    foot_height = np.zeros((2, T))
    foot_speed = np.zeros((2, max(T - 1, 0)))
    for f in range(2):
        gx = torch.as_tensor(foot_pts[f][:, 0])
        gy = torch.as_tensor(foot_pts[f][:, 1])
        foot_height[f] = foot_pts[f][:, 2] - _ground_of(ground, gx, gy, slice(0, T)).numpy()
        if T > 1:
            foot_speed[f] = np.linalg.norm(foot_next[f][:-1, :2] - foot_pts[f][:-1, :2], axis=1) * motion.fps
    return _Track(joints, floor_share, self_share, foot_height, foot_speed, kvs, foot_verts, foot_k, list(bones))


def window_bounds(num_frames: int, fps: float, window_s: float = LOCK_WINDOW_S):
    """(T,) first and last frame of the centred window of frame t: t ∓ k, k = max(1, round(fps · window_s /
    2)) frames, clamped to the clip (the foot-speed estimator of docs/metrics.md; the solver's foot lock)."""
    k = max(1, int(round(fps * window_s / 2.0)))
    t = np.arange(num_frames)
    return np.clip(t - k, 0, num_frames - 1), np.clip(t + k, 0, num_frames - 1)


def foot_speed_windowed(track: _Track, fps: float, window_s: float = LOCK_WINDOW_S) -> np.ndarray:
    """(2, T) horizontal speed of each foot by a central difference over ``window_s`` (docs/metrics.md).

    At frame t the foot point is that frame's lowest foot vertex v; its speed is
    |H(x_v(t + k)) − H(x_v(t − k))| / (2k / fps) with k = max(1, round(fps · window_s / 2)) frames, the
    same vertex at both ends (clamped to the clip at its ends). It is the mean speed over the window, i.e. a
    box low-pass of the raw velocity, which removes capture jitter that a 1-frame difference amplifies by fps.
    """
    T = track.foot_height.shape[1]
    a, b = window_bounds(T, fps, window_s)
    out = np.zeros((2, T))
    for f in range(2):
        v = track.foot_low[f]
        d = track.foot_verts[f][b, v, :2] - track.foot_verts[f][a, v, :2]
        out[f] = np.linalg.norm(d, axis=-1) / np.maximum(b - a, 1) * fps
    return out


def jerk_magnitude(positions: np.ndarray, fps: float) -> np.ndarray:
    """|third forward difference| · fps³ of (T, ..., 3) positions -> (T − 3, ...) in m/s³."""
    if len(positions) < 4:
        return np.zeros((0,) + positions.shape[1:-1])
    j = positions[3:] - 3 * positions[2:-1] + 3 * positions[1:-2] - positions[:-3]
    return np.linalg.norm(j, axis=-1) * float(fps) ** 3


def f1_score(truth: np.ndarray, pred: np.ndarray) -> float:
    """F1 of binary predictions against binary truth (NaN when both have no positives)."""
    truth, pred = np.asarray(truth, bool), np.asarray(pred, bool)
    tp = np.sum(truth & pred)
    fp = np.sum(~truth & pred)
    fn = np.sum(truth & ~pred)
    if tp + fp + fn == 0:
        return float("nan")
    return float(2 * tp / (2 * tp + fp + fn))


def roc_auc(truth: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for binary ``truth`` (Mann–Whitney, ties count half);
    NaN when truth has a single class."""
    truth = np.asarray(truth, bool)
    score = np.asarray(score, float)
    npos, nneg = truth.sum(), (~truth).sum()
    if npos == 0 or nneg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    s = score[order]
    # average ranks over ties
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1
        i = j + 1
    return float((ranks[truth].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def _contact_pairs(limbs_a, limbs_b):
    from .weights import allowed_pairs
    return np.nonzero(allowed_pairs(limbs_a, None, True))


def evaluate(source: Character, source_motion: Motion, target: Character, target_motion: Motion,
             terrain=None, source_ground=0.0) -> dict:
    """Every metric of docs/metrics.md for ``target_motion`` against ``source_motion`` (the ground truth).

    Args:
        terrain: optional HeightField under the target.
        source_ground: the source's floor: a level (metres) or a (T,) array of levels per frame (the solve's
            ``SolveJob.source_ground_level``; ``core.ground``).
    Returns:
        dict of floats: jerk_mean/max (m/s³), floor_pen_mean/max and self_pen_mean/max (area shares in
        [0, 1]), grounded_f1/auc, locked_f1/auc, contact_f1/precision/recall, and source_* twins of the
        per-clip measures.
    """
    if source_motion.num_frames != target_motion.num_frames:
        raise CoreError("Source and target clips have different frame counts: evaluate the same range.")
    for c in (source, target):
        if not c.height:
            raise CoreError(f"Character '{c.name}' has no height h_c.")
    kv = source.keyverts is not None and target.keyverts is not None
    if kv:
        order = [target.keyverts.names.index(n) for n in source.keyverts.names
                 if n in target.keyverts.names]
        kv = len(order) == len(source.keyverts)
    s_tr = _track(source, source_motion, source_ground, source.keyverts.vertex_ids if kv else None)
    t_tr = _track(target, target_motion, 0.0 if terrain is None else terrain,
                  target.keyverts.vertex_ids[order] if kv else None)
    hs, ht = float(source.height), float(target.height)
    out = {"frames": float(source_motion.num_frames)}
    # jerk on the core bones both characters map, so that target and source are compared joint for joint
    common = [n for n in t_tr.joint_names if n in s_tr.joint_names]
    for name, tr, fps in (("", t_tr, target_motion.fps), ("source_", s_tr, source_motion.fps)):
        j = jerk_magnitude(tr.joints[:, [tr.joint_names.index(n) for n in common]], fps)
        out[name + "jerk_mean"] = float(j.mean()) if j.size else 0.0
        out[name + "jerk_max"] = float(j.max()) if j.size else 0.0
        out[name + "floor_pen_mean"] = float(tr.floor_share.mean())
        out[name + "floor_pen_max"] = float(tr.floor_share.max())
        out[name + "self_pen_mean"] = float(tr.self_share.mean())
        out[name + "self_pen_max"] = float(tr.self_share.max())
    # feet (both feet pooled)
    g_true = (np.abs(s_tr.foot_height) <= GROUNDED_FRACTION * hs).ravel()
    g_pred = (np.abs(t_tr.foot_height) <= GROUNDED_FRACTION * ht).ravel()
    out["grounded_f1"] = f1_score(g_true, g_pred)
    out["grounded_auc"] = roc_auc(g_true, -(np.abs(t_tr.foot_height) / ht).ravel())
    s_speed = foot_speed_windowed(s_tr, source_motion.fps)
    t_speed = foot_speed_windowed(t_tr, target_motion.fps)
    l_true = (s_speed < LOCKED_FRACTION * hs).ravel()
    l_pred = (t_speed < LOCKED_FRACTION * ht).ravel()
    out["locked_f1"] = f1_score(l_true, l_pred)
    out["locked_auc"] = roc_auc(l_true, -(t_speed / ht).ravel())
    r_true = (s_tr.foot_speed < LOCKED_STRICT_FRACTION * hs).ravel()
    r_pred = (t_tr.foot_speed < LOCKED_STRICT_FRACTION * ht).ravel()
    out["locked_strict_f1"] = f1_score(r_true, r_pred)
    out["locked_strict_auc"] = roc_auc(r_true, -(t_tr.foot_speed / ht).ravel())
    out["source_grounded_share"] = float(g_true.mean())
    # the source's own feet, never under its floor: what a target copying them exactly but standing on the floor
    # would score (a source that sinks through its floor caps the grounded F1 of every floor-respecting target)
    out["source_grounded_f1_clamped"] = f1_score(
        g_true, (np.clip(s_tr.foot_height, 0.0, None) <= GROUNDED_FRACTION * hs).ravel())
    out["source_locked_share"] = float(l_true.mean()) if l_true.size else float("nan")
    out["source_locked_strict_share"] = float(r_true.mean()) if r_true.size else float("nan")
    # key-vertex contacts
    if kv:
        ii, jj = _contact_pairs(source.keyverts.limbs, source.keyverts.limbs)
        ds = np.linalg.norm(s_tr.keyverts[:, jj] - s_tr.keyverts[:, ii], axis=-1)
        dt_ = np.linalg.norm(t_tr.keyverts[:, jj] - t_tr.keyverts[:, ii], axis=-1)
        c_true = ds < CONTACT_FRACTION * hs
        c_pred = dt_ < CONTACT_FRACTION * ht
        tp = np.sum(c_true & c_pred)
        out["contact_f1"] = f1_score(c_true, c_pred)
        out["contact_precision"] = float(tp / max(c_pred.sum(), 1)) if c_pred.any() else float("nan")
        out["contact_recall"] = float(tp / max(c_true.sum(), 1)) if c_true.any() else float("nan")
        out["source_contacts"] = float(c_true.sum())
    return out
