"""A hand that rests on the body in the source rests on it in the target: the surface contacts the key vertices miss
(docs/solver.md "Surface contacts").

The key vertices are sparse: a hand laid flat on a hip or a thigh may touch the skin while no key vertex of the hand is
within d_min of one on the hip, so no pair term knows of the contact, and where copy-rotations sinks the hand into a
wider target the self barrier pushes it out and nothing brings it back: it hangs centimetres off the body. Here the
source's own surfaces say where its hands touch: on each frame, a hand whose nearest probe is within ``TOUCH`` +
``PROBE_SPACING`` of the height of a body field's surface (``surface_fields``, the source's own fields, read signed)
touches that part. On those (frame, hand, field) entries the target's hand is pulled to the same part's skin: its
nearest probe's distance to that part's surface, past the source's own there (a share g of the source's height, at least
``GAP``), is charged as the self barrier charges a depth,

    Σ relu(min_q d(q) − max(g, GAP)·h)² / (T·(1 % h)²) · w_self_barrier · ``WEIGHT``,

reported in 'dist' (the term of the source's contacts). d is the part's field where the field is the part's own (in
its box and nearer than ``FAR``); elsewhere the distance to the tangent plane of the nearest of ``SAMPLES``
farthest-point samples of the part's rest skin, carried by the field's frame, negative inside: a field reads "far"
wherever another segment's surface is nearer (the crease between a hip and a thigh) and would not pull a hand back
from there. The barrier keeps the hand from sinking in; this keeps it from leaving. Only a captured source body says
where it touches on its trunk, neck, head and thighs (``PARTS``); a fitted body, whose widths are the template's, only
where a hand meets the other hand or forearm (``FITTED_PARTS``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..character.memo import per_character
from ..rig.affine import inv
from ..rig.humanoid import unsided
from ..rig.parts import vertex_segments
from ..rig.skinning import bind_matrices
from .surface import box_coords, box_maps, field_frames, field_tensor, own_penetration, read_fields
from .surface_fields import AXIS, FAR, SurfaceFields, farthest_points, surface_fields, world_points

#: the probe segments whose contacts are kept (canonical names without the side)
SEGMENTS = ("hand",)
#: the parts a captured source body's hand is kept on (canonical names without the side): the body, not the other
#: hand or arm, whose key vertices the pair terms already match
PARTS = ("hips", "spine", "chest", "upper_chest", "neck", "head", "upper_leg")
#: the parts a fitted source body's hand is kept on: the other hand and forearm only. A fitted body is a template
#: posed by the skeleton: its hands and forearms are about any performer's size, so where two of them meet the
#: performer's did (a two-handed grip), while its trunk's and thighs' widths are the template's and a hand brushing
#: them is the fit's. Its key vertices do not say it: two fitted hands in a grip overlap, and the target's, matched
#: to the same distances, hang apart (docs/decisions.md "A fitted source's hands that meet are kept together")
FITTED_PARTS = ("hand", "lower_arm")
#: a source hand touches a field's part when its skin is within this share of its height of the surface (the mesh
#: measure's ``hand_contacts.TOUCH_FRACTION``)
TOUCH = 0.005
#: the probes are sparse (96 on a hand) and their nearest reads a touching hand's skin up to about this share of the
#: height farther than the skin's nearest vertex does: a touch is read within TOUCH + this. A hand read as touching
#: that did not quite touch is kept no farther than it was (``Touches.gap``), never pulled closer
PROBE_SPACING = 0.0025
#: the target's hand is charged past this share of its height from that surface, or past the source's own distance
#: there where that is farther (it rests on the skin)
GAP = 0.002
#: samples of each field's part that the target's hand is read against
SAMPLES = 256
#: the term's weight, relative to ``w_self_barrier`` (0: off)
WEIGHT = 1.0
_CHUNK = 16      #: source frames read at once
_BLOCK = 1 << 21  #: (probe, sample) distances read at once
_SKIN = {}


def signed_distances(fields: SurfaceFields, points: torch.Tensor, grid: torch.Tensor, t, q, f,
                     maps: tuple = None) -> torch.Tensor:
    """(K,) the signed distance (metres, negative inside) of probe q to field f's surface at frame t (each (K,)
    long) at ``points`` (T, 4F + Q, 3), differentiable: inside the field's box its trilinear read, outside it the
    box's border value plus the probe's distance to the box. ``maps``: ``box_maps(fields, points)`` when the caller
    has them."""
    M, c = box_maps(fields, points) if maps is None else maps
    u = box_coords(fields, points, t, q, f, (M, c))
    per_u = 1.0 / M.flatten(0, 1).index_select(0, t * fields.num_fields + f).norm(dim=-1)        # world length per u
    outside = ((u.abs() - 1.0).clamp_min(0.0) * per_u).norm(dim=-1)
    return read_fields(grid, u, f) + outside


def _entries(fields: SurfaceFields) -> tuple:
    """(rows (H, P) long: each kept probe segment's probes, names (H,): its segment's name, tested (H, F) bool)."""
    rows, names = [], []
    for name in sorted(set(fields.probe_names)):
        if unsided(name) in SEGMENTS:
            rows.append([i for i, n in enumerate(fields.probe_names) if n == name])
            names.append(name)
    if not rows:
        return None, (), None
    P = min(len(r) for r in rows)
    idx = torch.as_tensor([r[:P] for r in rows])
    return idx, tuple(names), torch.as_tensor(fields.tested)[idx[:, 0]]


class Touches(NamedTuple):
    """The source's hand touches, E entries: on frame t (E,) long, the hand s (E,) long (an index into the target's
    kept probe segments, ``_entries``) touches the part of field f (E,) long (the target's index), its nearest probe
    gap (E,) of the source's height from that part's surface (negative inside)."""
    t: torch.Tensor
    s: torch.Tensor
    f: torch.Tensor
    gap: torch.Tensor


def kept_parts(source) -> tuple:
    """The parts (canonical names without the side) a hand of ``source``'s body is kept on: ``FITTED_PARTS`` for a
    fitted body, ``PARTS`` for a captured one."""
    return FITTED_PARTS if source.mesh.fitted else PARTS


def hand_distances(fields: SurfaceFields, track) -> tuple:
    """(d (T, H, F), names (H,), tested (H, F) bool): each kept probe segment's (``_entries``) nearest probe's signed
    distance to each field's surface, a share of the height (negative inside), over the clip of ``track`` (a
    ClipTrack of the fields' character); its names; whether the barrier reads that segment in that field. None
    without a kept segment."""
    idx, names, tested = _entries(fields)
    if idx is None:
        return None
    with torch.no_grad():
        pts = world_points(fields, track)                                                     # (T, 4F + Q, 3)
        grid = field_tensor(fields, pts.dtype)
        (H, P), F = idx.shape, fields.num_fields
        d = []
        for chunk in pts.split(_CHUNK):
            B = chunk.shape[0]
            t = torch.arange(B).repeat_interleave(H * P * F)
            q = idx.flatten().repeat_interleave(F).repeat(B)
            f = torch.arange(F).repeat(B * H * P)
            d.append(signed_distances(fields, chunk, grid, t, q, f).reshape(B, H, P, F).amin(2))
    return torch.cat(d) / fields.height, names, tested


def source_touches(src_fields: SurfaceFields, track, tgt_fields: SurfaceFields, parts: tuple = PARTS) -> Touches:
    """The frames where a source hand's nearest probe is within (TOUCH + PROBE_SPACING)·h of the surface of one of
    ``parts``, from the source's clip (``track``, a ClipTrack) on its own fields, indexed as the target's fields."""
    t_names = _entries(tgt_fields)[1]
    empty = Touches(*(torch.zeros(0, dtype=torch.long),) * 3, torch.zeros(0))
    read = hand_distances(src_fields, track) if t_names else None        # the source's clip read only if needed
    if read is None:
        return empty
    d, s_names, s_tested = read
    touch = (d <= TOUCH + PROBE_SPACING) & s_tested[None]
    out = ([], [], [], [])
    for h, name in enumerate(s_names):
        if name not in t_names:
            continue
        for fs, field in enumerate(src_fields.field_names):
            if field not in tgt_fields.field_names or unsided(field) not in parts:
                continue
            frames = torch.nonzero(touch[:, h, fs], as_tuple=True)[0]
            out[0].append(frames)
            out[1].append(torch.full_like(frames, t_names.index(name)))
            out[2].append(torch.full_like(frames, tgt_fields.field_names.index(field)))
            out[3].append(d[frames, h, fs])
    return Touches(*(torch.cat(x) for x in out)) if out[0] else empty


def skin_samples(character, fields: SurfaceFields) -> tuple:
    """(local (F, S, 3), normals (F, S, 3)): ``SAMPLES`` farthest-point samples of each field's part's rest vertices and
    their unit normals, in the field bone's bind frame (armature units; a part with fewer vertices repeats some)."""
    def compute():
        sk, mesh = character.skeleton, character.mesh
        seg, names, bone_ids = vertex_segments(sk, mesh, character.bone_map)
        G = bind_matrices(sk, mesh)
        pos, nrm = [], []
        for name in fields.field_names:
            ids = np.nonzero(seg == names.index(name))[0]
            pick = ids[farthest_points(mesh.rest_verts[ids], SAMPLES)]
            pick = pick[np.arange(SAMPLES) % len(pick)]
            Binv = inv(G[bone_ids[names.index(name)]])
            pos.append(mesh.rest_verts[pick] @ Binv[:3, :3].T + Binv[:3, 3])
            n = mesh.rest_normals[pick] @ Binv[:3, :3].T
            nrm.append(n / np.linalg.norm(n, axis=-1, keepdims=True).clip(1e-12))
        return np.stack(pos), np.stack(nrm)
    return per_character(_SKIN, character, compute, fields.field_names)


class SurfaceReach:
    """The term: on each (frame, hand, field) entry where the source's hand touches that part, the target's hand's
    nearest probe past max(the source's, GAP)·h from the part's surface (``skin_samples``), squared, / (T·(1 % h)²)
    · ``weight``.

    Args:
        fields: the target's SurfaceFields; samples: its ``skin_samples``.
        touches: ``source_touches``; weight: w_self_barrier × WEIGHT.
    """

    def __init__(self, fields: SurfaceFields, grid: torch.Tensor, samples: tuple, touches: Touches, weight: float,
                 dtype, device):
        self.fields, self.grid, self.weight = fields, grid, float(weight)
        self.local, self.normals = (torch.as_tensor(x, dtype=dtype, device=device) for x in samples)
        self.probes = _entries(fields)[0].to(device)                                               # (H, P)
        self.t, self.s, self.f = (x.to(device) for x in touches[:3])
        self.unit = (0.01 * fields.height) ** 2
        #: (E,) how far each entry's hand may stay from the skin: the source's own distance, at least GAP (metres)
        self.gap = touches.gap.to(device=device, dtype=dtype).clamp_min(GAP) * fields.height

    def _surface(self, o, axes, e, k=None):
        """World positions and unit normals (E', K, 3) of the samples of entries ``e`` (E',): all of them (K = S), or
        samples ``k`` (E', K) long."""
        f = self.f[e]
        local, normals = (self.local[f], self.normals[f]) if k is None else \
            (self.local[f[:, None], k], self.normals[f[:, None], k])
        A = axes[self.t[e], f]                                                                     # (E', 3, 3)
        x = torch.einsum("eax,eka->ekx", A, local) / AXIS + o[self.t[e], f][:, None]
        n = torch.einsum("eax,eka->ekx", A, normals)
        return x, n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def _distances(self, points, maps, o, axes, probes, e, q, k=None):
        """(d, k) (E', P'): the distance to the skin of probes ``q`` (E', P') of entries ``e`` (E',): the field's
        read where it is the part's own (in its box and nearer than FAR), else the tangent plane of the nearest sample
        (or of samples ``k`` (E', P') when given); and the samples read. ``maps``: ``box_maps`` at ``points``; o,
        axes: ``_frames`` there."""
        E_, P_ = q.shape
        t, f = self.t[e][:, None].expand(-1, P_), self.f[e][:, None].expand(-1, P_)
        field = signed_distances(self.fields, points, self.grid, t.flatten(), q.flatten(), f.flatten(), maps)
        field = field.view(E_, P_)
        p = probes[t, q]                                                                           # (E', P', 3)
        own = field < (FAR - 0.01) * self.fields.height
        if k is None:                    # the nearest samples, searched only for entries with a probe off the field
            k = torch.zeros_like(q)
            with torch.no_grad():
                off = torch.nonzero((~own).any(1), as_tuple=True)[0]
                if len(off):
                    k[off] = torch.cdist(p[off], self._surface(o, axes, e[off])[0]).argmin(-1)
        x, n = self._surface(o, axes, e, k)                                                        # (E', P', 3)
        plane = ((p - x) * n).sum(-1)
        return torch.where(own, field, plane), k

    def weighted(self, points: torch.Tensor) -> torch.Tensor:
        """The weighted term at ``points`` (T, 4F + Q, 3) (the surface barrier's carried points)."""
        E = len(self.t)
        if not E:
            return points.new_zeros(())
        o, axes = field_frames(self.fields, points)
        maps = box_maps(self.fields, points)
        probes = points[:, 4 * self.fields.num_fields:]
        P, S = self.probes.shape[1], self.local.shape[1]
        near_q, near_k = [], []
        with torch.no_grad():                              # each entry's probe nearest the skin, and its sample
            for e in torch.arange(E, device=points.device).split(max(1, _BLOCK // (P * S))):
                d, k = self._distances(points, maps, o, axes, probes, e, self.probes[self.s[e]])
                best = d.argmin(-1)
                near_q.append(self.probes[self.s[e], best])
                near_k.append(k.gather(1, best[:, None]))
        e = torch.arange(E, device=points.device)
        d = self._distances(points, maps, o, axes, probes, e, torch.cat(near_q)[:, None], torch.cat(near_k))[0][:, 0]
        return self.weight * torch.relu(d - self.gap).square().sum() / (points.shape[0] * self.unit)


def surface_reach(job) -> SurfaceReach:
    """``job``'s SurfaceReach on its surface barrier's (``job.surface``) fields and points, or None: no barrier,
    WEIGHT 0, a source without a body, or no touch in the source (on ``PARTS``; a fitted body's, ``FITTED_PARTS``)."""
    src, barrier = job.source, job.surface
    if barrier is None or WEIGHT <= 0 or src.mesh is None:
        return None
    src_fields = surface_fields(src)
    if src_fields is None:
        return None
    touches = source_touches(src_fields, job.source_track, barrier.fields, kept_parts(src))
    if not len(touches.t):
        return None
    return SurfaceReach(barrier.fields, barrier.grid, skin_samples(job.target, barrier.fields), touches,
                        job.settings.w_self_barrier * WEIGHT, job.dtype, job.device)


def own_terms(job, out: dict):
    """Add ``job``'s own-body terms to its weighted terms ``out``: a limb inside its own body (the self barriers,
    ``surface.own_penetration``, kept on ``job.last_own_penetration``) in 'pen', a hand off the skin that the source's
    rests on (``job.reach``) in 'dist'."""
    job.last_own_penetration = own_penetration(job)
    if job.last_own_penetration is not None:
        out["pen"] = out["pen"] + job.last_own_penetration
    if job.reach is not None:
        out["dist"] = out["dist"] + job.reach.weighted(job.body_positions[:, job.surface.rows])
