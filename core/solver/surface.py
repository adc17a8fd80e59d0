"""A hand kept on the skin of the body it touches: the self barrier's mesh-true part (docs/solver.md "Self
barrier").

The capsule barrier (``barrier.py``) sees a body as capsule cores whose radius is the median distance of a segment's
vertices to its bone: a hand can sink centimetres into a big belly, a chest or a head while staying outside every
core, and two hands that hold each other can sink into one another. Here the surface itself is the proxy. Each
torso, head, thigh, hand and forearm segment carries a signed distance field of the body's rest surface, sampled
once on a regular grid in its bone's frame (``surface_fields``): the distance to the nearest vertex's tangent plane,
negative inside, kept only where that nearest vertex belongs to the segment (elsewhere the field is "far": the
interior is shared out between the segments whose surface is nearest). Points spread over each hand and forearm
(``PROBE_SEGMENTS``, farthest-point samples of their vertices) are carried by their bones, as the capsule ends are;
each step puts them in each field's frame (the frame from four points that the field's bone carries) and reads the
field there, trilinear and differentiable (``surface_depths``). A probe is tested against a field only when the two
segments are not neighbours in the skeleton (``core.metrics.measures.segment_exclusion``: a forearm meets the upper
arm at the elbow without any penetration).

The barrier is Σ relu(depth − allow)² over every (frame, probe, field), divided by T·(1 % h)² like the capsule
barrier's, weighted by ``w_self_barrier`` and reported in 'pen': a hand may rest on the skin (depth ≤ ALLOW·h), not
sink into it whatever copy-rotations does, and no deeper than the source's own hand in its own body at that frame
(``source_allowance``, scaled by the heights; none from a fitted source body, whose overlaps are the fit's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree   # POT's own dependency

from ..character.memo import per_character
from ..metrics.measures import segment_exclusion
from ..rig.affine import inv
from ..rig.parts import vertex_segments
from ..rig.skinning import bind_matrices

#: segments (canonical names without their side) whose surface is a field: what a hand touches on a body, and the
#: hands and forearms themselves (hands that clap, hold each other or a wrist)
FIELD_SEGMENTS = ("hips", "spine", "chest", "upper_chest", "neck", "head", "upper_leg", "hand", "lower_arm")
#: segments whose surface points probe the fields: the hands and forearms
PROBE_SEGMENTS = ("hand", "lower_arm")
#: probe points per probe segment (farthest-point samples of its vertices)
PROBES = 12
#: grid nodes along each axis of a field
GRID = 28
#: a field's box: its segment's vertices' bounds grown by this share of the body's height
MARGIN = 0.04
#: depth a hand may rest at, share of the body's height (a hand on a belly presses the skin this much)
ALLOW = 0.002
#: the value of a field where the nearest surface is another segment's, share of the body's height
FAR = 0.05
#: the frame points' distance from the bone's origin, in the armature's units
AXIS = 0.1

#: surface_fields per character by identity (immutable while it lives)
_FIELDS = {}


@dataclass(frozen=True)
class SurfaceFields:
    """A character's surface fields and probe points.

    Attributes:
        field_bone: (F,) skeleton bone index of each field's segment; field_names: their canonical names.
        lo, hi: (F, 3) each field's box in its bone's bind frame (armature units).
        grid: (F, GRID, GRID, GRID) signed distance in metres (world), indexed [z, y, x] of the bone frame.
        probe_bone: (Q,) skeleton bone index carrying each probe; probe_local: (Q, 3) its position in that bone's
            bind frame; probe_names: (Q,) its segment's canonical name.
        tested: (Q, F) bool, the probe and the field are of segments that are not neighbours.
        height: the body's height in metres (world).
    """

    field_bone: np.ndarray
    field_names: tuple
    lo: np.ndarray
    hi: np.ndarray
    grid: np.ndarray
    probe_bone: np.ndarray
    probe_local: np.ndarray
    probe_names: tuple
    tested: np.ndarray
    height: float

    @property
    def num_fields(self) -> int:
        return len(self.field_bone)

    def carried_points(self) -> tuple:
        """(bones (4F + Q,), local (4F + Q, 3)): points for the solver's chain to carry, each field's frame (its
        bone's origin and three points ``AXIS`` along its axes), then the probes."""
        F = self.num_fields
        frame = np.zeros((F, 4, 3))
        frame[:, 1:] = AXIS * np.eye(3)
        return (np.concatenate([np.repeat(self.field_bone, 4), self.probe_bone]),
                np.concatenate([frame.reshape(-1, 3), self.probe_local]))


def surface_fields(character) -> SurfaceFields:
    """``character``'s SurfaceFields (computed once per character object), or None without a mesh or without a
    pair of segments to test."""
    return per_character(_FIELDS, character, lambda: _surface_fields(character))


def _base(name: str) -> str:
    return name.removeprefix("left_").removeprefix("right_")


def _surface_fields(character):
    sk, mesh = character.skeleton, character.mesh
    if mesh is None:
        return None
    seg, names, bone_ids = vertex_segments(sk, mesh, character.bone_map)
    body = seg >= 0
    V, N = mesh.rest_verts, mesh.rest_normals
    scale = float(np.cbrt(abs(np.linalg.det(sk.object_matrix[:3, :3])))) or 1.0
    height = float(np.ptp(V[body, 2])) * scale if body.any() else 0.0
    fields = [s for s, n in enumerate(names) if _base(n) in FIELD_SEGMENTS and (seg == s).sum() >= 20]
    probes = [s for s, n in enumerate(names) if _base(n) in PROBE_SEGMENTS and (seg == s).sum() >= PROBES]
    excl = segment_exclusion(names)
    tested = np.array([[not excl[p, f] for f in fields] for p in probes], dtype=bool).reshape(len(probes), -1)
    if not fields or not tested.any():
        return None
    G = bind_matrices(sk, mesh)
    tree, body_n, body_seg = cKDTree(V[body]), N[body], seg[body]
    lo, hi, grids = [], [], []
    lin = np.linspace(0.0, 1.0, GRID)
    for s in fields:
        Binv = inv(G[bone_ids[s]])
        local = V[seg == s] @ Binv[:3, :3].T + Binv[:3, 3]
        pad = MARGIN * height / scale
        a, b = local.min(0) - pad, local.max(0) + pad
        z, y, x = np.meshgrid(a[2] + lin * (b[2] - a[2]), a[1] + lin * (b[1] - a[1]), a[0] + lin * (b[0] - a[0]),
                              indexing="ij")
        nodes = np.stack([x, y, z], -1).reshape(-1, 3) @ G[bone_ids[s]][:3, :3].T + G[bone_ids[s]][:3, 3]
        grids.append(_signed_distance(nodes, tree, body_n, body_seg, s).reshape(GRID, GRID, GRID) * scale)
        lo.append(a)
        hi.append(b)
    grid = np.minimum(np.stack(grids), FAR * height)
    p_bone, p_local, p_names = [], [], []
    for s in probes:
        ids = np.nonzero(seg == s)[0]
        pick = ids[_farthest_points(V[ids], PROBES)]
        Binv = inv(G[bone_ids[s]])
        p_bone += [bone_ids[s]] * len(pick)
        p_local.append(V[pick] @ Binv[:3, :3].T + Binv[:3, 3])
        p_names += [names[s]] * len(pick)
    tested_q = np.repeat(tested, [PROBES] * len(probes), axis=0)
    return SurfaceFields(np.array([bone_ids[s] for s in fields], dtype=np.int64), tuple(names[s] for s in fields),
                         np.array(lo), np.array(hi), grid, np.array(p_bone, dtype=np.int64), np.concatenate(p_local),
                         tuple(p_names), tested_q, height)


def _signed_distance(nodes: np.ndarray, tree: cKDTree, normals: np.ndarray, vert_seg: np.ndarray,
                     s: int) -> np.ndarray:
    """(M,) float64: each node's (M, 3) signed distance (armature units) to the tangent plane of its nearest
    vertex (``tree`` over the body's vertices), where that vertex is of segment ``s``; +inf where it is another
    segment's."""
    _, k = tree.query(nodes)
    d = ((nodes - tree.data[k]) * normals[k]).sum(-1)
    return np.where(vert_seg[k] == s, d, np.inf)


def _farthest_points(P: np.ndarray, k: int) -> np.ndarray:
    """Indices of ``k`` farthest-point samples of points P (V, 3), starting from the point farthest from their
    centroid."""
    chosen = [int(np.argmax(((P - P.mean(0)) ** 2).sum(1)))]
    d = ((P - P[chosen[0]]) ** 2).sum(1)
    while len(chosen) < min(k, len(P)):
        chosen.append(int(np.argmax(d)))
        d = np.minimum(d, ((P - P[chosen[-1]]) ** 2).sum(1))
    return np.array(chosen)


def surface_depths(fields: SurfaceFields, points: torch.Tensor, grid: torch.Tensor = None) -> torch.Tensor:
    """(T, Q, F) depth in metres of each probe below each field's surface (0 outside it, outside the field's box,
    and for pairs of neighbouring segments).

    Args:
        fields: the character's SurfaceFields.
        points: (T, 4F + Q, 3) world positions of ``fields.carried_points()`` (frames first, then probes).
        grid: the fields' grids as a (F, 1, GRID, GRID, GRID) tensor of ``points``' dtype and device (made when
            None).
    """
    F = fields.num_fields
    T = points.shape[0]
    frame = points[:, :4 * F].reshape(T, F, 4, 3)
    probes = points[:, 4 * F:]                                                          # (T, Q, 3)
    o = frame[:, :, 0]                                                                  # (T, F, 3)
    axes = frame[:, :, 1:] - o[:, :, None]                                              # (T, F, 3 axes, 3)
    rel = probes[:, :, None] - o[:, None]                                               # (T, Q, F, 3)
    local = AXIS * torch.einsum("tfax,tqfx->tqfa", axes, rel) / (axes * axes).sum(-1)[:, None]   # (T, Q, F, 3)
    lo = torch.as_tensor(fields.lo, dtype=points.dtype, device=points.device)
    hi = torch.as_tensor(fields.hi, dtype=points.dtype, device=points.device)
    u = 2.0 * (local - lo) / (hi - lo) - 1.0                                            # (T, Q, F, 3) in [-1, 1]
    if grid is None:
        grid = field_tensor(fields, points.dtype, points.device)
    sdf = torch.nn.functional.grid_sample(grid, u.permute(2, 0, 1, 3).reshape(F, 1, 1, -1, 3), mode="bilinear",
                                          padding_mode="border", align_corners=True)    # (F, 1, 1, 1, T·Q)
    sdf = sdf.reshape(F, T, -1).permute(1, 2, 0)                                        # (T, Q, F)
    keep = (u.abs() <= 1.0).all(-1) & torch.as_tensor(fields.tested, device=points.device)
    return torch.relu(-sdf) * keep


def field_tensor(fields: SurfaceFields, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """(F, 1, GRID, GRID, GRID) the fields' grids, as ``surface_depths`` reads them."""
    return torch.as_tensor(fields.grid, dtype=dtype, device=device)[:, None]


class SurfaceBarrier:
    """The solver's term: Σ relu(depth − allow)² / (T·(1 % h)²) · ``weight`` over ``surface_depths``, ``allow`` (T, Q,
    F) ALLOW·h past the source's own depth for the same probe and field segments (``source_allowance``).

    Sparse and exact: each evaluation reads every (frame, probe, field) once without gradients, then only the
    entries deeper than their allowance (the only ones with a value or a gradient) again with them, so the backward
    pass costs what the penetrating probes cost, not T·Q·F.
    """

    def __init__(self, fields: SurfaceFields, weight: float, allow: torch.Tensor, dtype=torch.float32, device="cpu"):
        self.fields = fields
        self.weight = float(weight)
        self.grid = field_tensor(fields, dtype, device)
        self.allow = allow.to(dtype=dtype, device=device)
        self.unit = (0.01 * fields.height) ** 2

    def weighted(self, points: torch.Tensor) -> torch.Tensor:
        """The weighted term at ``points`` (T, 4F + Q, 3) (``SurfaceFields.carried_points``' world positions)."""
        with torch.no_grad():
            deep = surface_depths(self.fields, points, self.grid) > self.allow                # (T, Q, F)
        t, q, f = torch.nonzero(deep, as_tuple=True)
        if len(t) == 0:
            return points.new_zeros(())
        d = depths_at(self.fields, points, self.grid, t, q, f)
        return self.weight * torch.relu(d - self.allow[t, q, f]).square().sum() / (points.shape[0] * self.unit)


def depths_at(fields: SurfaceFields, points: torch.Tensor, grid: torch.Tensor, t, q, f) -> torch.Tensor:
    """(K,) ``surface_depths(fields, points, grid)[t, q, f]`` for the K entries (t, q, f) (each (K,) long), read
    only there (differentiable in ``points``); entries of a probe and a field ``surface_depths`` leaves at 0 (out of
    the field's box, or neighbours) must not be asked for."""
    F = fields.num_fields
    frame = points[t[:, None], 4 * f[:, None] + torch.arange(4, device=points.device)]         # (K, 4, 3)
    o = frame[:, 0]
    axes = frame[:, 1:] - o[:, None]                                                          # (K, 3 axes, 3)
    rel = points[t, 4 * F + q] - o                                                            # (K, 3)
    local = AXIS * torch.einsum("kax,kx->ka", axes, rel) / (axes * axes).sum(-1)              # (K, 3)
    lo = torch.as_tensor(fields.lo, dtype=points.dtype, device=points.device)[f]
    hi = torch.as_tensor(fields.hi, dtype=points.dtype, device=points.device)[f]
    u = 2.0 * (local - lo) / (hi - lo) - 1.0                                                  # (K, 3) in [-1, 1]
    # one grid_sample over the F fields: each field's entries in a row of its own, padded at the box's centre
    order = torch.argsort(f, stable=True)
    counts = torch.bincount(f, minlength=F)
    rank = torch.empty_like(f)
    rank[order] = torch.arange(len(f), device=f.device) - (torch.cumsum(counts, 0) - counts)[f[order]]
    rows = u.new_zeros((F, int(counts.max()), 3)).index_put((f, rank), u)
    sdf = torch.nn.functional.grid_sample(grid, rows[:, None, None], mode="bilinear", padding_mode="border",
                                          align_corners=True)                                 # (F, 1, 1, 1, Kmax)
    return torch.relu(-sdf[:, 0, 0, 0][f, rank])


def world_points(fields: SurfaceFields, track) -> torch.Tensor:
    """(T, 4F + Q, 3) float64 world positions of ``fields.carried_points()`` over a ClipTrack's clip."""
    bones, local = fields.carried_points()
    R, P = track.arm_rotations[:, bones], track.arm_positions[:, bones]
    arm = (R @ torch.as_tensor(local, dtype=R.dtype)[..., None])[..., 0] + P
    M = torch.as_tensor(track.character.skeleton.object_matrix, dtype=R.dtype)
    return arm @ M[:3, :3].T + M[:3, 3]


def source_allowance(fields: SurfaceFields, source, track, scale: float) -> torch.Tensor:
    """(T, Q, F) float64 depth each target probe may reach in each target field: ALLOW·h (the resting press), past
    the source's own depth where its hand is in its own body at that frame (the deepest of the source's probes of
    the same segment into its field of the same segment, × ``scale`` = h_tgt / h_src). A fitted source body (a
    skeleton-only source, ``SkinnedMesh.fitted``) allows none of its depths: where its limbs overlap, the fit does. So
    a character retargeted onto itself comes back as it is, and a hand never sinks deeper than the captured body's."""
    T = track.num_frames
    floor = torch.full((T, len(fields.probe_bone), fields.num_fields), ALLOW * fields.height, dtype=torch.float64)
    src = surface_fields(source) if source.mesh is not None and not source.mesh.fitted else None
    if src is None:
        return floor
    with torch.no_grad():
        d = surface_depths(src, world_points(src, track))                                  # (T, Qs, Fs)
    out = floor.clone()
    for sp in sorted(set(src.probe_names) & set(fields.probe_names)):
        rows_s = [i for i, n in enumerate(src.probe_names) if n == sp]
        rows_t = [i for i, n in enumerate(fields.probe_names) if n == sp]
        for fs, name in enumerate(src.field_names):
            if name in fields.field_names:
                deepest = d[:, rows_s, fs].amax(1) * scale + ALLOW * fields.height         # (T,)
                ft = fields.field_names.index(name)
                out[:, rows_t, ft] = torch.maximum(out[:, rows_t, ft], deepest[:, None])
    return out


def surface_barrier(job):
    """``job``'s SurfaceBarrier, its points appended to ``job.body_points`` (the chain carries them with the
    capsule ends; ``rows``: where they are in ``job.body_positions``), or None when ``w_self_barrier`` is 0 or the
    target has no fields. Call after ``own_capsules`` and before the chain is built (``job.source_track`` set)."""
    w = job.settings.w_self_barrier
    fields = surface_fields(job.target) if w > 0 and job.target.mesh is not None else None
    if fields is None:
        return None
    bones, local = fields.carried_points()
    start = 0 if job.body_points is None else len(job.body_points[0])
    if job.body_points is not None:
        bones = np.concatenate([job.body_points[0], bones])
        local = np.concatenate([job.body_points[1], local])
    job.body_points = (bones, local)
    allow = source_allowance(fields, job.source, job.source_track, job.h_tgt / job.h_src)
    barrier = SurfaceBarrier(fields, w, allow, job.dtype, job.device)
    barrier.rows = slice(start, len(bones))
    return barrier


def own_penetration(job) -> torch.Tensor:
    """A limb inside ``job``'s own body at its current ``body_positions``: the capsule barrier's
    (``barrier.own_barrier``) plus the surface barrier's, weighted (reported in 'pen')."""
    total = job.body_positions.new_zeros(())
    if job.own_barrier is not None:
        total = total + job.own_barrier.weighted([job.body_positions.unflatten(1, (-1, 2))])
    if job.surface is not None:
        total = total + job.surface.weighted(job.body_positions[:, job.surface.rows])
    return total
