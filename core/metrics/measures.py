"""Per-frame measures of one clip over its ground (the quantities the metrics score: docs/metrics.md).

``measuring(track, ground, keyvert_ids)`` reads a clip through its ``core.character.track.ClipTrack`` and returns its
``Measures``: the joints, the feet (``core.contacts.feet``: each foot's lowest vertex and its height, the raw one-frame
speed), the key vertices, and one chunked float32 skinning pass over the whole mesh for the floor and
self-penetration shares. Every quantity is per frame, so a clip can be measured a stretch of frames at a time
(``core.metrics.scores.evaluations`` does, with the few neighbouring frames its speeds and jerk need); the scores
(F1, AUC, means) are ``core.metrics.scores``'.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..character.memo import per_character
from ..rig.affine import inv
from .broadphase import Groups, candidates, capsule_boxes, group_boxes, skin_rows, skinning_matrix
from ..errors import CoreError
from ..contacts.feet import LOCK_WINDOW_S, window_bounds
from ..rig.humanoid import CANONICAL_PARENT
from ..keyverts import area_weights
from ..rig.parts import vertex_segments
from ..progress import drive
from ..rig.skinning import bind_matrices
from ..contacts.terrain import ground_height
from ..character.track import ClipTrack
from ..types import Character

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
        inv_s = inv(G[bone_ids[s]])
        loc = v @ inv_s[:3, :3].T + inv_s[:3, 3]
        lo, hi = np.percentile(loc[:, 1], [5, 95])
        a[s] = (0, lo, 0)
        b[s] = (0, hi, 0)
        yy = np.clip(loc[:, 1], lo, hi)
        d = np.linalg.norm(loc - np.stack([np.zeros_like(yy), yy, np.zeros_like(yy)], 1), axis=1)
        r[s] = SELF_PEN_CORE * np.median(d)
    return _Capsules(np.asarray(bone_ids), a, b, r, segment_exclusion(bones))


def segment_exclusion(bones: list, hops: int = SELF_PEN_HOPS) -> np.ndarray:
    """(B, B) bool: segments (canonical names) within ``hops`` of each other in the mapped canonical tree, itself
    included: they share a skinned joint region, so their capsules overlap without any penetration."""
    B = len(bones)
    par = np.full(B, -1)
    for s, c in enumerate(bones):
        p = CANONICAL_PARENT.get(c)
        while p is not None and p not in bones:
            p = CANONICAL_PARENT.get(p)
        if p is not None:
            par[s] = bones.index(p)
    adj = np.eye(B, dtype=bool)
    for s in range(B):
        if par[s] >= 0:
            adj[s, par[s]] = adj[par[s], s] = True
    excl = np.eye(B, dtype=bool)
    reach = np.eye(B, dtype=bool)
    for _ in range(hops):
        reach = (reach.astype(np.int64) @ adj.astype(np.int64)) > 0
        excl |= reach
    return excl


def point_segment_distance(p, a, b):
    """Distance of points p (..., V, 1, 3) to segments a, b (..., 1, B, 3) -> (..., V, B) (the partner
    penetration pass, ``core.metrics.partners``)."""
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


class _SurfaceSetup(NamedTuple):
    """What the whole-mesh pass of one character reads, whatever its clip (``_surface_setup``): the vertices'
    area weights (V,) and skinning matrix (V, J·4) (``core.metrics.broadphase.skinning_matrix``); the
    self-penetration sample ordered by segment (``groups``: ``core.metrics.broadphase.Groups``) with its areas (S,)
    summing to 1, its skinning matrix (S, J·4), and which capsule each sampled vertex is tested against (S, C);
    the capsules' bones (C,), extents along their axis lo, hi (C,) and squared radii (C,); (G, C) the
    segment–capsule pairs ever tested."""
    area: torch.Tensor
    skin: torch.Tensor
    sample: np.ndarray
    groups: object
    s_area: torch.Tensor
    s_skin: torch.Tensor
    test: torch.Tensor
    cbone: torch.Tensor
    lo: torch.Tensor
    hi: torch.Tensor
    r2: torch.Tensor
    pairs: torch.Tensor


#: _surface_setup per character, by identity (a Character is immutable: a retarget measures its source once and
#: its target twice). {id: (weak reference, ((seg, bones, bone ids), _SurfaceSetup))}: ``character.memo.per_character``
_SETUPS = {}


def _surface_setup(character: Character) -> tuple:
    """((seg (V,), bones, bone_ids): ``vertex_segments``, _SurfaceSetup) of a character, computed once per
    character object and kept while it lives (shared: never modify its arrays)."""
    return per_character(_SETUPS, character, lambda: _build_surface_setup(character))


def _build_surface_setup(character: Character) -> tuple:
    sk, mesh = character.skeleton, character.mesh
    segments = vertex_segments(sk, mesh, character.bone_map)
    seg, bones, bone_ids = segments
    dt = torch.float32
    caps = _capsules(character, seg, bones, bone_ids)
    V = mesh.num_verts
    sample = np.arange(0, V, max(1, int(np.ceil(V / SELF_PEN_MAX_VERTICES))))
    sample = sample[seg[sample] >= 0]
    groups = Groups(seg[sample], len(bones))
    sample = sample[groups.order]                    # segment by segment (the broad phase's groups)
    s_seg = seg[sample]
    area = torch.as_tensor(vertex_areas(mesh), dtype=dt)
    s_area = area[torch.as_tensor(sample)]
    s_area = s_area / s_area.sum().clamp_min(1e-12)
    valid = torch.as_tensor(caps.radius > 0)
    test = ~torch.as_tensor(caps.excluded[s_seg]) & valid[None, :]  # (S, C)
    # vertices already inside a foreign capsule at rest are not counted (modelled contact, not penetration)
    Grest = torch.as_tensor(bind_matrices(sk, mesh), dtype=dt)
    cbone = torch.as_tensor(caps.bone)
    lo, hi = torch.as_tensor(caps.a[:, 1], dtype=dt), torch.as_tensor(caps.b[:, 1], dtype=dt)
    r2 = torch.as_tensor(caps.radius, dtype=dt) ** 2
    test &= ~_inside_capsules(torch.as_tensor(mesh.rest_verts[sample], dtype=dt), Grest[cbone, :3, 3],
                              Grest[cbone, :3, 1], lo, hi, r2)
    J = sk.num_bones
    pairs = ~torch.as_tensor(caps.excluded) & valid[None, :]
    setup = _SurfaceSetup(area, skinning_matrix(mesh.rest_verts, mesh.weight_bones, mesh.weight_values, J), sample,
                          groups, s_area, skinning_matrix(mesh.rest_verts[sample], mesh.weight_bones[sample],
                                                          mesh.weight_values[sample], J),
                          test, cbone, lo, hi, r2, pairs)
    return segments, setup


def _inside_entries(p, P, U, lo, hi, r2):
    """(E,) bool: points p (E, 3) inside the capsules along unit vectors U (E, 3) from P + lo·U to P + hi·U
    (P (E, 3); lo, hi, r2 = radius² (E,)), one entry per row: the squared distance to the axis segment from the
    offset q = p − P itself (``_inside_capsules``' expansion |p|² − 2 p·P + |P|² loses digits far from the origin:
    a vertex within 0.1 % of a hand capsule's radius on a centimetre rig)."""
    q = p - P
    y = (q * U).sum(-1)
    c = torch.minimum(torch.maximum(y, lo), hi)
    return ((q - c[:, None] * U) ** 2).sum(-1) < r2


def _self_inside(su: _SurfaceSetup, sv, P, U, parts: np.ndarray = None) -> torch.Tensor:
    """(B, S) bool: each sampled vertex sv (B, S, 3) inside a capsule it is tested against (P, U (B, C, 3): the
    capsules' bone origins and axes), from the broad phase's candidate entries only; adds each entry's area share
    to ``parts`` (G, C) when given."""
    B, S = sv.shape[:2]
    hit = torch.zeros((B, S), dtype=torch.bool)
    if not su.pairs.any():
        return hit
    ends_a, ends_b = P + su.lo[None, :, None] * U, P + su.hi[None, :, None] * U
    boxes = group_boxes(sv, su.groups)
    caps = capsule_boxes(ends_a, ends_b, su.r2.sqrt())
    for f, s, c in candidates(boxes, caps, su.pairs, su.groups):
        keep = su.test[s, c]
        f, s, c = f[keep], s[keep], c[keep]
        inside = _inside_entries(sv[f, s], P[f, c], U[f, c], su.lo[c], su.hi[c], su.r2[c])
        f, s, c = f[inside], s[inside], c[inside]
        hit[f, s] = True
        if parts is not None:
            np.add.at(parts, (su.groups.group[s].numpy(), c.numpy()), su.s_area[s].numpy())
    return hit


def _surface_shares(track: ClipTrack, ground, parts: np.ndarray = None):
    """Generator yielding the share of frames done after each chunk; returns (floor share (T,), self share (T,)):
    one chunked float32 skinning pass over the whole mesh (float32 is about 0.1 µm at 2 m, below
    FLOOR_TOLERANCE), each vertex blended from its own few skin weights; the self-penetration test runs on the
    entries the box broad phase keeps (``core.metrics.broadphase``). ``parts``: a (B, B) array to which the area
    share of segment s's surface inside capsule c is added, summed over frames."""
    character = track.character
    sk = character.skeleton
    dt = torch.float32
    _, su = _surface_setup(character)
    T = track.num_frames
    floor_share = np.zeros(T)
    self_share = np.zeros(T)
    field = callable(ground)             # a terrain needs each vertex's x and y; a level floor only its z
    world = torch.as_tensor(sk.object_matrix, dtype=dt)[:3] if field else \
        torch.as_tensor(sk.object_matrix, dtype=dt)[2:3]                                              # (R, 4)
    with torch.no_grad():
        for sl, S_rot, S_t in track.skinning_chunks(_CHUNK):
            S = torch.cat([S_rot, S_t[..., None]], -1).to(dt)                  # (B, J, 3, 4) armature space
            B, J = S.shape[:2]
            Sw = world[:, :3] @ S                                               # (B, J, R, 4) world rows
            Sw[..., 3] += world[:, 3]
            rows = skin_rows(su.skin, Sw)                                       # (B, V, R)
            z = rows[..., -1]                                                   # (B, V) world z
            x, y = (rows[..., 0], rows[..., 1]) if field else (z, z)
            hgt = z - ground_height(ground, x, y, sl)
            floor_share[sl] = ((hgt < -FLOOR_TOLERANCE).to(dt) * su.area).sum(-1).numpy()
            sv = skin_rows(su.s_skin, S)                                        # (B, S, 3) armature space
            R = track.arm_rotations[sl].to(dt)[:, su.cbone]
            inside = _self_inside(su, sv, track.arm_positions[sl].to(dt)[:, su.cbone], R[..., 1], parts)
            self_share[sl] = (inside.to(dt) * su.s_area).sum(-1).numpy()
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
        (_, bones, bone_ids), _ = _surface_setup(character)
        floor_share, self_share = yield from _surface_shares(track, ground)
        height, step, lows = _feet(track, ground)
        return Measures(track.world_positions[:, bone_ids], list(bones), floor_share, self_share, height, step,
                        track.foot_points, lows, None if kv is None else track.vertices(kv))
    return (yield from track.memo_steps(key, compute))


def measure(track: ClipTrack, ground=0.0, keyvert_ids=None) -> Measures:
    """``measuring`` run to its end: every per-frame measure of a clip over its ground (kept on the track)."""
    return drive(measuring(track, ground, keyvert_ids))


def self_pen_parts(track: ClipTrack) -> tuple:
    """(segments (B,), (B, B) mean area share of segment s's surface inside segment c's capsule over the clip):
    where a clip's self-penetration (``Measures.self_share``) is, for diagnostics."""
    (_, bones, _), _ = _surface_setup(track.character)
    parts = np.zeros((len(bones), len(bones)))
    drive(_surface_shares(track, 0.0, parts))
    return list(bones), parts / max(track.num_frames, 1)


def foot_heights(track: ClipTrack, ground=0.0) -> np.ndarray:
    """(2, T) lowest point of each foot (left, right) above ``ground`` (a level, (T,) levels per frame or a
    HeightField) on every frame of ``track``, in metres: the feet of docs/metrics.md, without the whole-mesh
    measures (the library report's foot-height plots)."""
    return _feet(track, ground)[0]


def foot_speed_windowed(measures: Measures, fps: float, window_s: float = LOCK_WINDOW_S, *, first: int = 0,
                        num_frames: int = None, frames=None) -> np.ndarray:
    """(2, F) horizontal speed of each foot by a central difference over ``window_s`` (docs/metrics.md).

    At frame t the foot point is that frame's lowest foot vertex v; its speed is
    |H(x_v(t + k)) − H(x_v(t − k))| / (2k / fps) with k = max(1, round(fps · window_s / 2)) frames, the
    same vertex at both ends (clamped to the clip at its ends). It is the mean speed over the window, i.e. a
    box low-pass of the raw velocity, which removes capture jitter that a 1-frame difference amplifies by fps.

    ``measures`` may cover a stretch of a longer clip: its frames are clip frames ``first`` onwards, the clip has
    ``num_frames`` frames (default: the measures' own), and the speed is computed at the clip frames ``frames``
    (default: every frame the measures cover), whose windows must lie within the measures' frames.
    """
    n = measures.foot_height.shape[1]
    T = n if num_frames is None else num_frames
    t = np.arange(first, first + n) if frames is None else np.asarray(frames, dtype=np.int64)
    a, b = window_bounds(T, fps, window_s, t)
    if len(t) and (a.min() < first or b.max() >= first + n):
        raise ValueError("foot_speed_windowed: the windows reach beyond the measured frames")
    out = np.zeros((2, len(t)))
    for f in range(2):
        v = measures.foot_low[f][t - first]
        d = measures.foot_points[f][b - first, v, :2] - measures.foot_points[f][a - first, v, :2]
        out[f] = np.linalg.norm(d, axis=-1) / np.maximum(b - a, 1) * fps
    return out


def pairs_closer(points: np.ndarray, ii: np.ndarray, jj: np.ndarray, d: float, chunk: int = 1024) -> np.ndarray:
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


#: the per-segment capsules of the self-penetration measure, for the partner metrics (``core.metrics.partners``)
segment_capsules = _capsules
