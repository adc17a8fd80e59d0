"""A hand kept on the skin of the body it touches: the self barrier's mesh-true part (docs/solver.md "Self
barrier").

The capsule barrier (``barrier.py``) sees a body as capsule cores whose radius is the median distance of a segment's
vertices to its bone: a hand can sink centimetres into a big belly, a chest or a head while staying outside every
core, and two hands that hold each other can sink into one another. Here the surface itself is the proxy. Each
torso, head, thigh and arm segment carries a signed distance field of the body's rest surface, and points spread
over each hand, forearm, upper arm and the chest probe them (``surface_fields.py``, built once per character). A
probe's depth in a field is read in that field's box coordinates (an affine map from the four points that the
field's bone carries, ``box_maps``), trilinear and differentiable (``surface_depths``, ``read_fields``). The solver
does not read every probe in every field at every step: it keeps as candidates the probes near a surface, found by
bounding spheres, and searches a frame again only when its points moved (``SurfaceBarrier``).

The barrier is Σ relu(depth − allow)² over every (frame, probe), the deepest field each, divided by T·(1 % h)² like
the capsule barrier's, weighted by ``w_self_barrier`` and reported in 'pen': a hand may rest on the skin (depth ≤
ALLOW·h), not sink into it whatever copy-rotations does, and no deeper than the source's own hand in its own body at
that frame (``source_allowance``, scaled by the heights; none from a fitted source body, whose overlaps are the
fit's).
"""

from __future__ import annotations

import numpy as np
import torch

from ..descriptors.weights import centred, largest_moves, refresh_due
from ..rig.humanoid import unsided
from ..rig.parts import vertex_segments
from ..rig.skinning import bind_matrices
from .capsules import capsule_ends
from .surface_fields import AXIS, SurfaceFields, surface_fields, world_points

#: depth a hand may rest at, share of the body's height (a hand on a belly presses the skin this much)
ALLOW = 0.002
#: the barrier lets a probe as deep as the source's own hand lies in its own body at that frame (scaled), past ALLOW
#: (``source_allowance``). False: ALLOW alone, whatever the source (an experiment, with ``--const``: docs/decisions.md
#: "A fitted body's overlaps pull no pair closer")
SOURCE_ALLOWANCE = True
#: a key vertex's neighbourhood for the contact state's SurfaceGate, share of the body's height (the contact depth's
#: d_min, ``core.metrics.scores.CONTACT_FRACTION``)
GATE_RADIUS = 0.05
#: the parts thinner than a fitted source's key vertices lie behind their surface when the two overlap (canonical
#: names without the side): behind a hand is past it, so L_pen leaves those entries to the barrier (``seen_pairs``);
#: behind a trunk, a head or a thigh is inside it, and L_pen's half-space keeps helping the barrier there
THIN_PARTS = ("hand",)
#: the barrier's candidates: the entries within this share of the body's height of their allowed depth (or of a
#: field's box) at their frame's last search (``SurfaceBarrier``)
SLACK = 0.02


def field_frames(fields: SurfaceFields, points: torch.Tensor) -> tuple:
    """(origins (T, F, 3), axes (T, F, 3 axes, 3)): each field's frame at ``points`` (T, 4F + Q, 3)."""
    F = fields.num_fields
    frame = points[:, :4 * F].unflatten(1, (F, 4))
    o = frame[:, :, 0]
    return o, frame[:, :, 1:] - o[:, :, None]


def box_maps(fields: SurfaceFields, points: torch.Tensor) -> tuple:
    """(M (T, F, 3, 3), c (T, F, 3)): the affine map u = M p + c from a world point p to each field's box
    coordinates at ``points`` (T, 4F + Q, 3), [-1, 1] inside the box."""
    o, axes = field_frames(fields, points)
    lo = torch.as_tensor(fields.lo, dtype=points.dtype, device=points.device)
    hi = torch.as_tensor(fields.hi, dtype=points.dtype, device=points.device)
    half = 0.5 * (hi - lo)                                                                   # (F, 3)
    M = AXIS * axes / (axes * axes).sum(-1, keepdim=True) / half[:, :, None]                 # (T, F, 3, 3)
    c = -(M @ o[..., None])[..., 0] - (lo + half) / half                                     # (T, F, 3)
    return M, c


def _probes(fields: SurfaceFields, points: torch.Tensor) -> torch.Tensor:
    """(T, Q, 3) the probes' world positions in ``points`` (T, 4F + Q, 3)."""
    return points[:, 4 * fields.num_fields:]


def surface_depths(fields: SurfaceFields, points: torch.Tensor, grid: torch.Tensor = None) -> torch.Tensor:
    """(T, Q, F) depth in metres of each probe below each field's surface (0 outside it, outside the field's box,
    and for pairs of neighbouring segments): the definition, read densely (the solver's barrier reads it where a
    probe is near a surface, ``SurfaceBarrier``).

    Args:
        fields: the character's SurfaceFields.
        points: (T, 4F + Q, 3) world positions of ``fields.carried_points()`` (frames first, then probes).
        grid: the fields' grids as ``field_tensor`` makes them, of ``points``' dtype and device (made when None).
    """
    M, c = box_maps(fields, points)
    u = torch.einsum("tfab,tqb->tqfa", M, _probes(fields, points)) + c[:, None]                # (T, Q, F, 3)
    f = torch.arange(fields.num_fields, device=points.device).expand(u.shape[:-1])
    grid = field_tensor(fields, points.dtype, points.device) if grid is None else grid
    keep = (u.abs() <= 1.0).all(-1) & torch.as_tensor(fields.tested, device=points.device)
    return torch.relu(-read_fields(grid, u.reshape(-1, 3), f.reshape(-1)).reshape(keep.shape)) * keep


def field_tensor(fields: SurfaceFields, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """(1, 1, F·(G + 1), G, G) the fields' grids (G = ``surface_fields.GRID`` nodes a side) stacked along their z
    axis, each followed by a slice that no read reaches (``read_fields``)."""
    g = torch.as_tensor(fields.grid, dtype=dtype, device=device)                            # (F, G, G, G)
    g = torch.cat([g, g[:, -1:]], 1)
    return g.reshape(1, 1, -1, *g.shape[-2:])


def read_fields(grid: torch.Tensor, u: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """(K,) the signed distance (metres, negative inside) of fields ``f`` (K,) long at box coordinates ``u`` (K,
    3), trilinear, each clamped to its box (the box's border value outside it): one grid_sample over the stacked
    ``grid`` (``field_tensor``), differentiable in ``u``."""
    D, G = grid.shape[2], grid.shape[-1]
    u = u.clamp(-1.0, 1.0)
    z = (f * (G + 1) + 0.5 * (u[:, 2] + 1.0) * (G - 1)) * (2.0 / (D - 1)) - 1.0
    at = torch.stack([u[:, 0], u[:, 1], z], -1)
    return torch.nn.functional.grid_sample(grid, at[None, None, None], mode="bilinear", padding_mode="border",
                                           align_corners=True).reshape(-1)


def _box_corners(fields: SurfaceFields, points: torch.Tensor, grow: float) -> torch.Tensor:
    """(T, F, 8, 3) world corners of each field's box grown by ``grow`` (armature units) at ``points``."""
    o, axes = field_frames(fields, points)
    lo = torch.as_tensor(fields.lo, dtype=o.dtype, device=o.device) - grow
    hi = torch.as_tensor(fields.hi, dtype=o.dtype, device=o.device) + grow
    pick = torch.as_tensor([[(c >> a) & 1 for a in range(3)] for c in range(8)], dtype=o.dtype, device=o.device)
    local = lo[:, None] + pick * (hi - lo)[:, None]                                              # (F, 8, 3)
    return o[:, :, None] + torch.einsum("tfax,fca->tfcx", axes, local) / AXIS


def near_entries(fields: SurfaceFields, points: torch.Tensor, grow: float = 0.0,
                 corners: torch.Tensor = None) -> tuple:
    """(t, q, f, u): t, q, f (K,) long, the tested (frame, probe, field) entries whose probe is in the field's box
    grown by ``grow`` (armature units), found without locating every probe in every field, and u (K, 3) their box
    coordinates (``box_maps``, the box not grown). A block of probes (``SurfaceFields.per_segment`` of one segment) lies
    in a sphere around their mean, and a grown box in the sphere through its corners: only the probes of a block whose
    sphere meets a field's are put in that field's box coordinates. ``corners``: ``_box_corners(fields, points,
    grow)`` when the caller has them. No gradients."""
    n = fields.per_segment
    dev = points.device
    with torch.no_grad():
        if corners is None:
            corners = _box_corners(fields, points, grow)                                         # (T, F, 8, 3)
        centre = corners.mean(2)                                                                 # (T, F, 3)
        reach = (corners[:, :, 0] - centre).norm(dim=-1)                                         # (T, F)
        probes = _probes(fields, points).unflatten(1, (-1, n))                                   # (T, S, n, 3)
        mid = probes.mean(2)                                                                     # (T, S, 3)
        spread = (probes - mid[:, :, None]).norm(dim=-1).amax(2)                                 # (T, S)
        tested = torch.as_tensor(fields.tested[::n], device=dev)                                 # (S, F)
        near = (torch.cdist(mid, centre) <= spread[..., None] + reach[:, None]) & tested          # (T, S, F)
        t, s, f = torch.nonzero(near, as_tuple=True)                                            # (G,) groups
        M, c = box_maps(fields, points)
        u = torch.einsum("gab,gnb->gna", M[t, f], probes[t, s]) + c[t, f, None]                 # (G, n, 3)
        lim = 1.0 + 2.0 * grow / torch.as_tensor(fields.hi - fields.lo, dtype=u.dtype, device=dev)[f]
        g, k = torch.nonzero((u.abs() <= lim[:, None]).all(-1), as_tuple=True)
    return t[g], s[g] * n + k, f[g], u[g, k]


class SurfaceBarrier:
    """The solver's term: Σ over (frame, probe) of the largest relu(depth − allow)² over the fields, / (T·(1 % h)²)
    · ``weight``, with ``surface_depths`` and ``allow`` (T, Q, F) ALLOW·h past the source's own depth for the same
    probe and field segments (``source_allowance``). The largest, not the sum: where fields share the interior
    (``SHARED_INTERIOR``), a probe in a belly is inside the hips', spine's and chest's fields at once and counts once.

    Sparse and exact, as the capsule barrier: a search (``near_entries``, then the field read there) keeps as
    candidates the entries whose probe is within ``SLACK``·h of its allowed depth (or of the field's box), and each
    step reads only those, without gradients, then with them only those deeper than their allowance (the only ones
    with a value or a gradient). A frame is searched again when a probe or a box corner moved, relative to the
    frame's centroid, by ``SLACK``·h / 4 since its last search (``refresh_due``): a probe then moved by at most
    half the band relative to a field, and the other half covers the field's slope (a distance to the nearest
    vertex's tangent plane, which can be steeper than 1 between two vertices).
    """

    def __init__(self, fields: SurfaceFields, weight: float, allow: torch.Tensor, dtype=torch.float32, device="cpu"):
        self.fields = fields
        self.weight = float(weight)
        self.grid = field_tensor(fields, dtype, device)
        self.allow = allow.to(dtype=dtype, device=device)
        self.unit = (0.01 * fields.height) ** 2
        self.band = SLACK * fields.height
        self.searched = 0              # frames searched, over every evaluation
        self._grow = None              # the band in armature units
        #: (t, q, f), each (K,) long, at the last evaluation: probe q inside field f at frame t, the two surfaces
        #: touching, or None; kept when ``record_touching`` (a ``SurfaceGate`` reads it)
        self.touching = None
        self.record_touching = False
        self.last_frames = torch.zeros(0, dtype=torch.long, device=device)   # (see ``weighted``)
        self.release()

    def release(self):
        """Forget the candidates (searched again at the next evaluation)."""
        self._ref = None               #: (T, Q + 8F, 3) the probes and grown box corners at each frame's search
        self._cand = None              #: (t, q, f) the candidates, each (K,) long

    def _search(self, points: torch.Tensor, frames: torch.Tensor, corners: torch.Tensor) -> tuple:
        """The candidates (t, q, f) on ``frames`` (n,) of ``points``: entries whose probe is within the band of
        its allowed depth, or in the band around the field's box (``corners`` (n, F, 8, 3): the grown boxes')."""
        t, q, f, u = near_entries(self.fields, points[frames], self._grow, corners)
        t = frames[t]
        with torch.no_grad():
            sdf = read_fields(self.grid, u, f)                                                # negative inside
            keep = (u.abs() > 1.0).any(-1) | (sdf + self.allow[t, q, f] < self.band)
        self.searched += len(frames)
        return t[keep], q[keep], f[keep]

    def candidates(self, points: torch.Tensor) -> tuple:
        """(t, q, f) every entry that may be deeper than its allowance at ``points`` (T, 4F + Q, 3), each (K,)
        long: searched again on the frames that moved (all of them at the first call)."""
        with torch.no_grad():
            if self._grow is None:                   # the frame points are AXIS armature units apart
                axes = field_frames(self.fields, points)[1]
                self._grow = float(self.band * AXIS / axes[:, :, 0].norm(dim=-1).mean())
            corners = _box_corners(self.fields, points, self._grow)                              # (T, F, 8, 3)
            now = centred(torch.cat([_probes(self.fields, points), corners.flatten(1, 2)], 1))
            if self._ref is None or self._ref.shape != now.shape:
                due = torch.ones(points.shape[0], dtype=torch.bool, device=points.device)
            else:
                due = refresh_due(largest_moves(now, self._ref) / (0.25 * self.band))
            if bool(due.any()):
                frames = torch.nonzero(due, as_tuple=True)[0]
                found = self._search(points, frames, corners[frames])
                if self._cand is None or bool(due.all()):
                    self._cand, self._ref = found, now
                else:
                    keep = ~due[self._cand[0]]
                    self._cand = tuple(torch.cat([c[keep], n]) for c, n in zip(self._cand, found))
                    self._ref[frames] = now[frames]
        return self._cand

    def weighted(self, points: torch.Tensor) -> torch.Tensor:
        """The weighted term at ``points`` (T, 4F + Q, 3) (``SurfaceFields.carried_points``' world positions)."""
        t, q, f = self.candidates(points)
        with torch.no_grad():
            depth = depths_at(self.fields, points, self.grid, t, q, f)
            deep = depth > self.allow[t, q, f]
            if self.record_touching:
                touch = depth > 0
                self.touching = (t[touch], q[touch], f[touch])
        t, q, f = t[deep], q[deep], f[deep]
        self.last_frames = t            #: the frames of the entries deeper than allowed at this evaluation
        if len(t) == 0:
            return points.new_zeros(())
        d = depths_at(self.fields, points, self.grid, t, q, f)
        excess = torch.relu(d - self.allow[t, q, f]).square()
        Q = len(self.fields.probe_bone)
        deepest = excess.new_zeros(points.shape[0] * Q).scatter_reduce(0, t * Q + q, excess, "amax")
        return self.weight * deepest.sum() / (points.shape[0] * self.unit)


def box_coords(fields: SurfaceFields, points: torch.Tensor, t, q, f, maps: tuple = None) -> torch.Tensor:
    """(K, 3) box coordinates of probe q in field f at frame t (each (K,) long) at ``points`` (T, 4F + Q, 3),
    differentiable; ``maps``: ``box_maps(fields, points)`` when the caller has them."""
    F = fields.num_fields
    M, c = box_maps(fields, points) if maps is None else maps
    at = t * F + f
    p = points.flatten(0, 1).index_select(0, t * points.shape[1] + 4 * F + q)                 # (K, 3)
    return (M.flatten(0, 1).index_select(0, at) @ p[:, :, None])[:, :, 0] + c.flatten(0, 1).index_select(0, at)


def depths_at(fields: SurfaceFields, points: torch.Tensor, grid: torch.Tensor, t, q, f) -> torch.Tensor:
    """(K,) ``surface_depths(fields, points, grid)[t, q, f]`` for the K entries (t, q, f) (each (K,) long), read
    only there (differentiable in ``points``); 0 where the probe is out of the field's box. Entries of neighbouring
    segments (``SurfaceFields.tested`` False) must not be asked for."""
    u = box_coords(fields, points, t, q, f)
    return torch.relu(-read_fields(grid, u, f)) * (u.abs() <= 1.0).all(-1)


def source_allowance(fields: SurfaceFields, source, track, scale: float) -> torch.Tensor:
    """(T, Q, F) float64 depth each target probe may reach in each target field: ALLOW·h (the resting press), past
    the source's own depth where its hand is in its own body at that frame (the deepest of the source's probes of
    the same segment into its field of the same segment, × ``scale`` = h_tgt / h_src). A fitted source body (a
    skeleton-only source, ``SkinnedMesh.fitted``) allows none of its depths: where its limbs overlap, the fit does. So
    a character retargeted onto itself comes back as it is, and a hand never sinks deeper than the captured body's.
    ALLOW·h alone with ``SOURCE_ALLOWANCE`` False."""
    T = track.num_frames
    floor = torch.full((T, len(fields.probe_bone), fields.num_fields), ALLOW * fields.height, dtype=torch.float64)
    src = surface_fields(source) if SOURCE_ALLOWANCE and source.mesh is not None and not source.mesh.fitted else None
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


class SurfaceGate:
    """Which entries of a pair set the surfaces already hold in contact (``objective.CONTACT_HELD_ON_SURFACE``): (frame
    t, key vertices i, j) where a probe within ``GATE_RADIUS`` of key vertex i (at rest) is inside j's segment's field
    at t, or the other way round, at the surface barrier's last evaluation (``SurfaceBarrier.touching``: the step
    before's, as the barrier is evaluated after the pair terms). The same neighbourhood as the contact depth's
    (docs/metrics.md): the surface around the key vertex touches the other part.

    Args:
        barrier: the job's SurfaceBarrier.
        probe_keys: (Q, K) long, the key vertices within GATE_RADIUS of each probe at rest, −1 padded.
        field: (N,) long, each key vertex's segment among the barrier's fields, −1 if it has none.
        num_frames: T.
    """

    def __init__(self, barrier, probe_keys: torch.Tensor, field: torch.Tensor, num_frames: int):
        self.barrier, self.probe_keys, self.field, self.num_frames = barrier, probe_keys, field, num_frames

    def reset(self):
        """Forget the barrier's last evaluation: nothing held until its next one."""
        self.barrier.touching = None

    def held(self, pairset) -> torch.Tensor:
        """(E,) bool over ``pairset``'s entries, all False before the barrier's first evaluation."""
        out = torch.zeros(len(pairset), dtype=torch.bool, device=pairset.t.device)
        if self.barrier.touching is None:
            return out
        t, q, f = self.barrier.touching
        N, F = len(self.field), self.barrier.fields.num_fields
        keys = self.probe_keys[q]                                                     # (M, K)
        at = ((t[:, None] * N + keys) * F + f[:, None])[keys >= 0]
        near = torch.zeros(self.num_frames * N * F, dtype=torch.bool, device=out.device)
        near[at] = True                                   # (T, N, F): the surface around key vertex n is in field f
        for a, b in ((pairset.i, pairset.j), (pairset.j, pairset.i)):
            fb = self.field[b]
            out |= (fb >= 0) & near[(pairset.t * N + a) * F + fb.clamp_min(0)]
        return out


def surface_gate(job, kv_ids) -> SurfaceGate:
    """``job``'s SurfaceGate for the contact state: each key vertex's (``kv_ids``, mesh vertex ids in the solve's
    order) segment among its surface barrier's fields, and the key vertices near each probe at rest; the barrier then
    records where its probes touch."""
    ch = job.target
    fields = job.surface.fields
    field = [fields.field_names.index(n) if n in fields.field_names else -1 for n in _keyvert_segments(job, kv_ids)]
    G = bind_matrices(ch.skeleton, ch.mesh)[fields.probe_bone]                       # (Q, 4, 4)
    probes = (G[:, :3, :3] @ fields.probe_local[..., None])[..., 0] + G[:, :3, 3]   # armature units, at rest
    d = np.linalg.norm(probes[:, None] - ch.mesh.rest_verts[kv_ids][None], axis=-1)      # (Q, N) armature units
    close = d * ch.skeleton.metres_per_unit < GATE_RADIUS * fields.height
    K = max(1, int(close.sum(1).max()))
    keys = np.full((len(probes), K), -1, np.int64)
    for k, row in enumerate(close):
        n = np.nonzero(row)[0]
        keys[k, :len(n)] = n
    job.surface.record_touching = True
    return SurfaceGate(job.surface, torch.as_tensor(keys, device=job.device), torch.as_tensor(field, device=job.device),
                       job.num_frames)


def _keyvert_segments(job, kv_ids) -> list:
    """(N,) the target's segment name of each key vertex (``kv_ids``, mesh vertex ids in the solve's order), '' for
    none."""
    ch = job.target
    seg, names, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    return [names[g] if g >= 0 else "" for g in seg[kv_ids]]


def seen_pairs(job, kv_ids) -> torch.Tensor:
    """(N, N) bool: [a, b] where a's segment is thin (``THIN_PARTS``) and ``job``'s surface barrier sees key vertex b's
    segment sink into it: b's segment carries probes, a's a field, and the barrier tests the two
    (``SurfaceFields.tested``). There L_pen need not keep a fitted source's key vertex b out of the half-space behind
    a's surface (``objective.FITTED_PEN_ON_MESH``): a few centimetres behind a hand is past it, not in it, and the
    mesh's own depth is read."""
    fields = job.surface.fields
    names = _keyvert_segments(job, kv_ids)
    field = np.asarray([fields.field_names.index(n) if n in fields.field_names
                        and unsided(n) in THIN_PARTS else -1 for n in names])
    probe = np.asarray([fields.probe_names.index(n) if n in fields.probe_names else -1 for n in names])
    seen = np.asarray(fields.tested)[probe.clip(0)][:, field.clip(0)].T                   # (N a, N b)
    seen &= (field >= 0)[:, None] & (probe >= 0)[None, :]
    return torch.as_tensor(seen, device=job.device)


def own_penetration_frames(job) -> torch.Tensor:
    """(T,) bool: the frames on which ``own_penetration``'s last evaluation has a gradient (an entry of either
    barrier deeper than allowed)."""
    out = torch.zeros(job.num_frames, dtype=torch.bool, device=job.device)
    for t in ([] if job.own_barrier is None else job.own_barrier.last_frames) + \
             ([] if job.surface is None else [job.surface.last_frames]):
        out[t] = True
    return out


def own_penetration(job):
    """A limb inside ``job``'s own body at its current ``body_positions``: the capsule barrier's
    (``barrier.own_barrier``) plus the surface barrier's, weighted (reported in 'pen'); None without either."""
    if job.own_barrier is None and job.surface is None:
        return None
    total = job.body_positions.new_zeros(())
    if job.own_barrier is not None:
        total = total + job.own_barrier.weighted([capsule_ends(job)])
    if job.surface is not None:
        total = total + job.surface.weighted(job.body_positions[:, job.surface.rows])
    return total
