"""Quality metrics of a retargeted clip against its source (ReConForM §5, Table 1). Definitions: docs/metrics.md.

``evaluate(source, source_motion, target, target_motion)`` returns a flat dict of floats (``evaluation``: the same as
a generator of progress fractions, for long clips). Each clip is read
through its ``core.track.ClipTrack`` (one forward-kinematics pass; a retarget passes the source's own track,
shared with the solver, so the source is measured once), and ``measure`` computes every per-frame quantity:
joints, the feet (``core.feet``), key vertices, and one chunked skinning pass over the whole mesh for the
floor and self-penetration shares.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .errors import CoreError
from .feet import LOCK_WINDOW_S, window_bounds
from .humanoid import CANONICAL_PARENT
from .keyverts import area_weights
from .parts import vertex_segments
from .progress import drive, scaled
from .skinning import bind_matrices
from .terrain import ground_height
from .track import ClipTrack
from .types import Character, Motion
from .weights import allowed_pairs

GROUNDED_FRACTION = 0.01     #: grounded: |foot height| <= 1 % of h_c
LOCKED_FRACTION = 0.01       #: locked: windowed horizontal foot speed < 1 % of h_c per second (docs/metrics.md)
LOCKED_STRICT_FRACTION = 0.001  #: the paper's printed 0.1 % h_c / s, on the raw 1-frame speed (locked_strict_*)
CONTACT_FRACTION = 0.05      #: key-vertex contact: pair distance < d_min = 5 % of h_c
FLOOR_TOLERANCE = 1e-6       #: a vertex is under its ground when more than this (metres, 1 µm) below it
SELF_PEN_MAX_VERTICES = 4000  #: vertices sampled (uniform stride) for the self-penetration measure
SELF_PEN_CORE = 0.5          #: capsule radius = this × the median distance of a segment's vertices to its axis
SELF_PEN_HOPS = 2            #: segments this close in the canonical tree are not tested against each other
_CHUNK = 32                  #: frames per chunk of the whole-mesh pass


def vertex_areas(mesh) -> np.ndarray:
    """(V,) area weight of each vertex: Σ over its faces of area / vertex count (rest pose), summing to 1."""
    w = area_weights(mesh.rest_verts, mesh.face_indices, mesh.face_offsets)
    total = w.sum()
    if total <= 0:
        return np.full(mesh.num_verts, 1.0 / mesh.num_verts)
    return w / total


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
    G = bind_matrices(sk, mesh)
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


def point_segment_distance(p, a, b):
    """Distance of points p (..., V, 1, 3) to segments a, b (..., 1, B, 3) -> (..., V, B) (the partner
    penetration pass, ``core.metrics_partners``)."""
    ab = b - a
    t = ((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)
    t = t.clamp(0, 1)
    return (p - (a + t[..., None] * ab)).norm(dim=-1)


def _inside_capsules(p, P, U, lo, hi, r2):
    """(..., S, C) bool: points p (..., S, 3) inside capsules whose axes run along the unit vectors U (..., C, 3)
    from P + lo·U to P + hi·U (P (..., C, 3); lo, hi, r2 = radius² (C,)). Squared distance to the axis segment
    |q|² − 2·c·y + c² (q = p − P, y = q·U, c = y clamped to [lo, hi]), from matrix products: no (S, C, 3)
    temporaries."""
    PU = (P * U).sum(-1)                                                        # (..., C)
    y = p @ U.transpose(-1, -2) - PU[..., None, :]                              # (..., S, C)
    c = torch.minimum(torch.maximum(y, lo), hi)
    q2 = (p * p).sum(-1)[..., None] - 2.0 * (p @ P.transpose(-1, -2)) + (P * P).sum(-1)[..., None, :]
    return q2 - 2.0 * c * y + c * c < r2


class Measures(NamedTuple):
    """Per-frame measures of one clip (``measure``).

    joints (T, Jc, 3) world positions of the mapped core bones, named by ``joint_names`` (Jc,);
    floor_share (T,) area share of the mesh below its ground; self_share (T,) area share inside another
    segment's capsule; foot_height (2, T) lowest foot point above the ground (left, right); foot_step_speed
    (2, T − 1) horizontal speed of frame t's lowest foot vertex from t to t + 1; foot_points, per foot (T, F, 3)
    world positions of its vertices, and foot_low, per foot (T,) index of the lowest one; keyverts (T, N, 3) or
    None.
    """

    joints: np.ndarray
    joint_names: list
    floor_share: np.ndarray
    self_share: np.ndarray
    foot_height: np.ndarray
    foot_step_speed: np.ndarray
    foot_points: list
    foot_low: list
    keyverts: np.ndarray


def _surface_shares(track: ClipTrack, ground, seg, bones, bone_ids):
    """Generator yielding the share of frames done after each chunk; returns (floor share (T,), self share (T,)):
    one chunked float32 skinning pass over the whole mesh (float32 is about 0.1 µm at 2 m, below
    FLOOR_TOLERANCE; the capsule test over thousands of vertices is the metrics' main cost)."""
    character = track.character
    sk, mesh = character.skeleton, character.mesh
    dt = torch.float32
    area = torch.as_tensor(vertex_areas(mesh), dtype=dt)
    caps = _capsules(character, seg, bones, bone_ids)
    V = mesh.num_verts
    sample = np.arange(0, V, max(1, int(np.ceil(V / SELF_PEN_MAX_VERTICES))))
    sample = sample[seg[sample] >= 0]
    s_seg = seg[sample]
    s_area = area[torch.as_tensor(sample)]
    s_area = s_area / s_area.sum().clamp_min(1e-12)
    valid = torch.as_tensor(caps.radius > 0)
    test = ~torch.as_tensor(caps.excluded[s_seg]) & valid[None, :]  # (S, B)
    # vertices already inside a foreign capsule at rest are not counted (modelled contact, not penetration)
    Grest = torch.as_tensor(bind_matrices(sk, mesh), dtype=dt)
    cbone = torch.as_tensor(caps.bone)
    lo, hi = torch.as_tensor(caps.a[:, 1], dtype=dt), torch.as_tensor(caps.b[:, 1], dtype=dt)
    r2 = torch.as_tensor(caps.radius, dtype=dt) ** 2
    test &= ~_inside_capsules(torch.as_tensor(mesh.rest_verts[sample], dtype=dt), Grest[cbone, :3, 3],
                              Grest[cbone, :3, 1], lo, hi, r2)
    T = track.num_frames
    floor_share = np.zeros(T)
    self_share = np.zeros(T)
    # linear blend skinning with the dense (V, J) weights: each vertex's blended transform is one matrix product
    W = torch.as_tensor(mesh.dense_weights(sk.num_bones), dtype=dt)
    rest_h = torch.cat([torch.as_tensor(mesh.rest_verts, dtype=dt), torch.ones((V, 1), dtype=dt)], 1)   # (V, 4)
    sample_t = torch.as_tensor(sample)
    W_s, rest_s = W[sample_t], rest_h[sample_t]
    field = callable(ground)             # a terrain needs each vertex's x and y; a level floor only its z
    world = torch.as_tensor(sk.object_matrix, dtype=dt)[:3] if field else \
        torch.as_tensor(sk.object_matrix, dtype=dt)[2:3]                                              # (R, 4)
    with torch.no_grad():
        for sl, S_rot, S_t in track.skinning_chunks(_CHUNK):
            S = torch.cat([S_rot, S_t[..., None]], -1).to(dt)                  # (B, J, 3, 4) armature space
            B, J = S.shape[:2]
            Sw = world[:, :3] @ S                                               # (B, J, R, 4) world rows
            Sw[..., 3] += world[:, 3]
            rows = (torch.matmul(W, Sw.reshape(B, J, -1)).reshape(B, V, -1, 4) * rest_h[:, None]).sum(-1)
            z = rows[..., -1]                                                   # (B, V) world z
            x, y = (rows[..., 0], rows[..., 1]) if field else (z, z)
            hgt = z - ground_height(ground, x, y, sl)
            floor_share[sl] = ((hgt < -FLOOR_TOLERANCE).to(dt) * area).sum(-1).numpy()
            sv = (torch.matmul(W_s, S.reshape(B, J, 12)).reshape(B, -1, 3, 4) * rest_s[:, None]).sum(-1)
            R = track.arm_rotations[sl].to(dt)[:, cbone]
            inside = _inside_capsules(sv, track.arm_positions[sl].to(dt)[:, cbone], R[..., 1], lo, hi, r2)
            self_share[sl] = ((inside & test[None]).any(-1).to(dt) * s_area).sum(-1).numpy()
            yield sl.stop / T
    return floor_share, self_share


def _feet(track: ClipTrack, ground) -> tuple:
    """(foot_height (2, T), foot_step_speed (2, T − 1), foot_low [(T,), (T,)]) of a clip over its ground."""
    T = track.num_frames
    height = np.zeros((2, T))
    step = np.zeros((2, max(T - 1, 0)))
    lows = []
    for f, (side, P) in enumerate(zip(("left", "right"), track.foot_points)):
        if P.shape[1] == 0:
            raise CoreError(f"Character '{track.character.name}': no mesh vertices on its {side} foot; map "
                            f"{side}_foot in the bone map.")
        x, y = torch.as_tensor(P[..., 0]), torch.as_tensor(P[..., 1])
        h = P[..., 2] - ground_height(ground, x, y).numpy()                    # (T, F)
        k = h.argmin(-1)
        lows.append(k)
        height[f] = h[np.arange(T), k]
        if T > 1:
            t = np.arange(T - 1)
            step[f] = np.linalg.norm(P[t + 1, k[:-1], :2] - P[t, k[:-1], :2], axis=-1) * track.fps
    return height, step, lows


def _ground_key(ground):
    if callable(ground):
        return ("field", id(ground))
    g = np.asarray(ground, dtype=np.float64)
    return ("level", float(g)) if g.ndim == 0 else ("levels", g.tobytes())


def measuring(track: ClipTrack, ground=0.0, keyvert_ids=None):
    """Generator yielding the share done (in [0, 1]) while the whole-mesh pass runs; returns every per-frame
    measure of a clip over its ground (a level, (T,) levels per frame, or a HeightField), computed once per
    track, ground and key-vertex list (kept on the track)."""
    character = track.character
    if character.mesh is None:
        raise CoreError(f"Character '{character.name}' has no mesh: metrics need one (fit a body first).")
    kv = None if keyvert_ids is None else np.asarray(keyvert_ids, dtype=np.int64)
    key = ("measures", _ground_key(ground), None if kv is None else kv.tobytes())

    def compute():
        seg, bones, bone_ids = vertex_segments(character.skeleton, character.mesh, character.bone_map)
        floor_share, self_share = yield from _surface_shares(track, ground, seg, bones, bone_ids)
        height, step, lows = _feet(track, ground)
        return Measures(track.world_positions[:, bone_ids], list(bones), floor_share, self_share, height, step,
                        track.foot_points, lows, None if kv is None else track.vertices(kv))
    return (yield from track.memo_steps(key, compute))


def measure(track: ClipTrack, ground=0.0, keyvert_ids=None) -> Measures:
    """``measuring`` run to its end: every per-frame measure of a clip over its ground (kept on the track)."""
    return drive(measuring(track, ground, keyvert_ids))


def foot_heights(track: ClipTrack, ground=0.0) -> np.ndarray:
    """(2, T) lowest point of each foot (left, right) above ``ground`` (a level, (T,) levels per frame or a
    HeightField) on every frame of ``track``, in metres: the feet of docs/metrics.md, without the whole-mesh
    measures (the library report's foot-height plots)."""
    return _feet(track, ground)[0]


def foot_speed_windowed(measures: Measures, fps: float, window_s: float = LOCK_WINDOW_S) -> np.ndarray:
    """(2, T) horizontal speed of each foot by a central difference over ``window_s`` (docs/metrics.md).

    At frame t the foot point is that frame's lowest foot vertex v; its speed is
    |H(x_v(t + k)) − H(x_v(t − k))| / (2k / fps) with k = max(1, round(fps · window_s / 2)) frames, the
    same vertex at both ends (clamped to the clip at its ends). It is the mean speed over the window, i.e. a
    box low-pass of the raw velocity, which removes capture jitter that a 1-frame difference amplifies by fps.
    """
    T = measures.foot_height.shape[1]
    a, b = window_bounds(T, fps, window_s)
    out = np.zeros((2, T))
    for f in range(2):
        v = measures.foot_low[f]
        d = measures.foot_points[f][b, v, :2] - measures.foot_points[f][a, v, :2]
        out[f] = np.linalg.norm(d, axis=-1) / np.maximum(b - a, 1) * fps
    return out


def _closer(points: np.ndarray, ii: np.ndarray, jj: np.ndarray, d: float, chunk: int = 1024) -> np.ndarray:
    """(T, P) bool: |points[:, jj] − points[:, ii]| < d for the P pairs (ii, jj) of (T, N, 3) ``points``, in
    chunks of frames (a 10 000-frame clip's (T, P, 3) differences would be hundreds of MB at once)."""
    out = np.empty((len(points), len(ii)), bool)
    for a in range(0, len(points), chunk):
        p = points[a:a + chunk]
        out[a:a + chunk] = np.linalg.norm(p[:, jj] - p[:, ii], axis=-1) < d
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
    _, inverse, counts = np.unique(score[order], return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts                  # rank - 1 of each distinct value's first occurrence
    ranks = np.empty(len(score))
    ranks[order] = (first + 0.5 * (counts + 1))[inverse]   # tied values share their average rank
    return float((ranks[truth].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def evaluate(source: Character, source_motion: Motion, target: Character, target_motion: Motion,
             terrain=None, source_ground=0.0, *, source_track: ClipTrack = None,
             target_track: ClipTrack = None) -> dict:
    """``evaluation`` run to its end: every metric of docs/metrics.md (a flat dict of floats)."""
    return drive(evaluation(source, source_motion, target, target_motion, terrain, source_ground,
                            source_track=source_track, target_track=target_track))


def evaluation(source: Character, source_motion: Motion, target: Character, target_motion: Motion,
               terrain=None, source_ground=0.0, *, source_track: ClipTrack = None,
               target_track: ClipTrack = None):
    """Generator yielding the share done (in [0, 1], through the whole-mesh passes of both clips); returns every
    metric of docs/metrics.md for ``target_motion`` against ``source_motion`` (the ground truth).

    Args:
        terrain: optional HeightField under the target.
        source_ground: the source's floor: a level (metres) or a (T,) array of levels per frame (the solve's
            ``SolveJob.source_ground_level``; ``core.ground``).
        source_track, target_track: the clips' ClipTracks when the caller has them (``core.retarget`` passes
            the source's, so its measures are computed once for the solve and for copy-rotations).
    Returns:
        dict of floats: jerk_mean/max and root_jerk_mean/max (m/s³), floor_pen_mean/max and self_pen_mean/max
        (area shares in [0, 1]), grounded_f1/auc, locked_f1/auc, contact_f1/precision/recall, and source_*
        twins of the per-clip measures.
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
    if source_track is None or source_track.character is not source or source_track.motion is not source_motion:
        source_track = ClipTrack(source, source_motion)
    if target_track is None or target_track.character is not target or target_track.motion is not target_motion:
        target_track = ClipTrack(target, target_motion)
    sizes = (source.mesh.num_verts, target.mesh.num_verts)     # the passes' costs, roughly
    s_steps = measuring(source_track, source_ground, source.keyverts.vertex_ids if kv else None)
    t_steps = measuring(target_track, 0.0 if terrain is None else terrain,
                        target.keyverts.vertex_ids[order] if kv else None)
    s_tr = yield from scaled(s_steps, 0.0, sizes[0] / sum(sizes))
    t_tr = yield from scaled(t_steps, sizes[0] / sum(sizes), 1.0)
    hs, ht = float(source.height), float(target.height)
    out = {"frames": float(source_motion.num_frames)}
    # jerk on the core bones both characters map, so that target and source are compared joint for joint
    common = [n for n in t_tr.joint_names if n in s_tr.joint_names]
    for name, tr, fps in (("", t_tr, target_motion.fps), ("source_", s_tr, source_motion.fps)):
        j = jerk_magnitude(tr.joints[:, [tr.joint_names.index(n) for n in common]], fps)
        out[name + "jerk_mean"] = float(j.mean()) if j.size else 0.0
        out[name + "jerk_max"] = float(j.max()) if j.size else 0.0
        if "hips" in tr.joint_names:   # the root alone: how smoothly it follows the ground (a terrain's steps)
            r = jerk_magnitude(tr.joints[:, tr.joint_names.index("hips")], fps)
            out[name + "root_jerk_mean"] = float(r.mean()) if r.size else 0.0
            out[name + "root_jerk_max"] = float(r.max()) if r.size else 0.0
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
    r_true = (s_tr.foot_step_speed < LOCKED_STRICT_FRACTION * hs).ravel()
    r_pred = (t_tr.foot_step_speed < LOCKED_STRICT_FRACTION * ht).ravel()
    out["locked_strict_f1"] = f1_score(r_true, r_pred)
    out["locked_strict_auc"] = roc_auc(r_true, -(t_tr.foot_step_speed / ht).ravel())
    out["source_grounded_share"] = float(g_true.mean())
    # the source's own feet, never under its floor: what a target copying them exactly but standing on the floor
    # would score (a source that sinks through its floor caps the grounded F1 of every floor-respecting target)
    out["source_grounded_f1_clamped"] = f1_score(
        g_true, (np.clip(s_tr.foot_height, 0.0, None) <= GROUNDED_FRACTION * hs).ravel())
    out["source_locked_share"] = float(l_true.mean()) if l_true.size else float("nan")
    out["source_locked_strict_share"] = float(r_true.mean()) if r_true.size else float("nan")
    # key-vertex contacts
    if kv:
        ii, jj = np.nonzero(allowed_pairs(source.keyverts.limbs, None, True))
        c_true = _closer(s_tr.keyverts, ii, jj, CONTACT_FRACTION * hs)
        c_pred = _closer(t_tr.keyverts, ii, jj, CONTACT_FRACTION * ht)
        tp = np.sum(c_true & c_pred)
        out["contact_f1"] = f1_score(c_true, c_pred)
        out["contact_precision"] = float(tp / max(c_pred.sum(), 1)) if c_pred.any() else float("nan")
        out["contact_recall"] = float(tp / max(c_true.sum(), 1)) if c_true.any() else float("nan")
        out["source_contacts"] = float(c_true.sum())
    return out


#: the per-segment capsules and the point-to-segment distance of the self-penetration measure, for the partner
#: metrics (``core.metrics_partners``)
segment_capsules = _capsules
