"""Self-penetration read on the skinned mesh itself: how deep the body's surface lies inside its other parts, and
the volume that makes (docs/metrics.md "Mesh self-penetration").

The body's surface is split into parts by dominant bone (``core.rig.parts.vertex_segments``: the canonical core
bones). A part's surface is an open patch; what lies inside the body is read against the **union of the parts
that do not share a joint region with the point's own part** (``segment_exclusion``: not itself, nor within
``HOPS`` steps in the canonical tree): for a surface point of part g, the nearest surface vertex q of that union
(its skinned position and normal on the frame) gives its depth −(p − q)·n_q, counted when positive. Where q lies
on the union's rim (a vertex beside a part the union leaves out: the opening where an arm joins the shoulder),
the point is beyond an opening, not inside, and counts 0. A point already inside at rest (the bind pose: a
modelled contact) counts only the depth it adds.

For two solids that overlap a little, the surface integral of one's depth inside the other, ∫ d dA, equals the
shared volume to first order (two spheres: both are πRh²/2 for an overlap h); over every part it counts each
overlap twice, once from each side, so

    shared volume ≈ ½ Σ_probes depth · area,   share = shared volume / body volume (per frame).

The probes are a uniform-stride sample of at most ``PROBE_MAX`` of the body's vertices, each standing for its share
of the surface's area; the surface read against is one vertex per ``SAMPLE_CELL`` cube of the rest pose (a face's or
a hand's dense detail thinned, a sparse part kept whole) and every probe, at most ``SURFACE_MAX`` vertices. Broad
phase: a probe is tested against the parts whose box on that frame holds it, so a clip costs what its near contacts
cost.

The same pass reads the contact depth (``core.metrics.contact_depth``): the same depth on every surface vertex near the
key vertices of the source's contacts (``near_depths``), not only on the probes.

Pure torch/numpy. ``surfaces`` (``setup``) once per character, ``depths`` per chunk of frames, ``mesh_measuring`` per
clip.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import torch

from ..character.memo import per_character
from ..character.track import ClipTrack
from ..rig.parts import vertex_segments
from .hand_contacts import HANDS, REGIONS, hand_surface, region_gaps
from .measures import SELF_PEN_HOPS, segment_exclusion, vertex_areas

PROBE_MAX = 2000      #: surface vertices whose depth is read (uniform stride)
#: the surface the depth is read against: one vertex per cube of this side (metres) of the rest pose, and every probe.
#: An index stride instead leaves holes where a mesh's vertices are sparse, and a point beside a hole reads as deep
#: inside (docs/metrics.md "Mesh self-penetration"); 0: every vertex
SAMPLE_CELL = 0.008
#: at most this many surface vertices read against (a uniform stride of the cell sample beyond it)
SURFACE_MAX = 40000
HOPS = SELF_PEN_HOPS  #: parts this close in the canonical tree share a joint region: never read against each other
_CHUNK = 32           #: frames per chunk
_BLOCK = 1 << 21      #: distance entries per block (the narrow phase's, the key vertices' neighbourhoods)


class BodySurface(NamedTuple):
    """A character's body surface as the measure reads it (rest pose, armature space).

    ids (M,) mesh vertex ids of the surface; part (M,) its part (segment index, ≥ 0); probe (S,) indices into
    ``ids`` of the probes; probe_area (S,) the area each stands for (armature units², summing to the surface's);
    allowed (G, G) bool: a probe of part g is read against part c; rim (G, M) bool: surface vertex m of a part
    allowed for g lies beside a part that is not (an opening of g's union); rest_depth (S,) each probe's depth
    in the bind pose; volume: the body's volume (armature units³); key (N,) indices into ``ids`` of the key
    vertices (or empty); key_hand (N,) bool: the key vertex is on a hand; scale: metres per armature unit; bones
    (G,): the parts' canonical names.
    """

    ids: np.ndarray
    part: np.ndarray
    probe: np.ndarray
    probe_area: np.ndarray
    allowed: np.ndarray
    rim: np.ndarray
    rest_depth: np.ndarray
    volume: float
    key: np.ndarray
    key_hand: np.ndarray
    scale: float
    bones: tuple = ()


def mesh_volume(verts: np.ndarray, tris: np.ndarray, normals: np.ndarray = None) -> float:
    """Enclosed volume of a triangle mesh (divergence theorem about its centroid; an open mesh with small holes,
    eyes or a mouth, reads close to its closed volume). With ``normals`` (V, 3) (outward vertex normals), each
    triangle counts with the winding its vertices' normals give it, whatever its stored winding."""
    if len(tris) == 0:
        return 0.0
    v = verts - verts.mean(0)
    a, b, c = v[tris[:, 0]], v[tris[:, 1]], v[tris[:, 2]]
    signed = np.einsum("ij,ij->i", a, np.cross(b, c))
    if normals is not None:                          # a triangle wound against its normals is turned round
        facing = np.einsum("ij,ij->i", np.cross(b - a, c - a), normals[tris].sum(1))
        signed = np.where(facing < 0, -signed, signed)
    return float(abs(signed.sum()) / 6.0)


def _edges(tris: np.ndarray) -> np.ndarray:
    """(E, 2) vertex pairs of the triangles' edges."""
    return np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]], 0)


def setup(character, keyvert_ids=None, probe_max: int = None, surface_max: int = None) -> BodySurface:
    """The BodySurface of ``character`` (its mesh is its body: ``core.character.meshparts``); ``keyvert_ids`` (N,)
    the key vertices whose neighbourhood depth ``depths`` reports (they join the surface); ``probe_max``,
    ``surface_max``: PROBE_MAX, SURFACE_MAX (read at the call) when None."""
    probe_max = PROBE_MAX if probe_max is None else probe_max
    surface_max = SURFACE_MAX if surface_max is None else surface_max
    sk, mesh = character.skeleton, character.mesh
    seg, bones, _ = vertex_segments(sk, mesh, character.bone_map)
    G = len(bones)
    owned = np.nonzero(seg >= 0)[0]
    A = sk.metres_per_unit
    probe_ids = owned[::max(1, int(np.ceil(len(owned) / probe_max)))]
    ids = owned
    if SAMPLE_CELL:
        cell = np.floor(mesh.rest_verts[owned] * (A / SAMPLE_CELL)).astype(np.int64)
        ids = owned[np.unique(cell, axis=0, return_index=True)[1]]
    ids = np.sort(ids)[::max(1, int(np.ceil(len(ids) / surface_max)))]
    kv = np.zeros(0, np.int64) if keyvert_ids is None else np.asarray(keyvert_ids, np.int64)
    ids = np.union1d(np.union1d(ids, probe_ids), kv[seg[kv] >= 0])
    probe = np.searchsorted(ids, probe_ids)
    area = vertex_areas(mesh)
    tris = mesh.triangles()
    total = 0.5 * np.linalg.norm(np.cross(mesh.rest_verts[tris[:, 1]] - mesh.rest_verts[tris[:, 0]],
                                          mesh.rest_verts[tris[:, 2]] - mesh.rest_verts[tris[:, 0]]), axis=1).sum()
    pa = area[ids[probe]]
    probe_area = pa / max(pa.sum(), 1e-30) * total
    allowed = ~segment_exclusion(bones, HOPS) if G else np.zeros((0, 0), bool)
    part = seg[ids]
    # rim: a surface vertex with a mesh neighbour whose part the union of g leaves out (or no part at all)
    e = _edges(tris)
    nb_part = np.full((mesh.num_verts, G + 1), False)
    for x, y in ((0, 1), (1, 0)):
        sy = seg[e[:, y]]
        nb_part[e[:, x], np.where(sy >= 0, sy, G)] = True
    nb = nb_part[ids]                                                        # (M, G + 1) parts beside m
    rim = np.zeros((G, len(ids)), bool)
    for g in range(G):
        out = np.append(~allowed[g], True)                                   # parts g's union leaves out
        rim[g] = allowed[g][part] & (nb & out[None]).any(1)
    pos = {i: k for k, i in enumerate(ids)}
    key = np.array([pos.get(int(i), -1) for i in kv], np.int64)
    limbs = character.keyverts.limbs if character.keyverts is not None and len(kv) == len(character.keyverts) \
        else [None] * len(kv)
    key_hand = np.array([lb in ("left_hand", "right_hand") for lb in limbs], bool)
    surf = BodySurface(ids, part, probe, probe_area, allowed, rim, np.zeros(len(probe)),
                       mesh_volume(mesh.rest_verts, tris, mesh.rest_normals), key, key_hand, float(A),
                       tuple(bones))
    rest = torch.as_tensor(mesh.rest_verts[ids], dtype=torch.float32)[None]
    rn = torch.as_tensor(mesh.rest_normals[ids], dtype=torch.float32)[None]
    return surf._replace(rest_depth=depths(surf, rest, rn, subtract_rest=False)[0].numpy())


#: (BodySurface, its every-vertex twin) per character and key-vertex set, by identity: ``surfaces``
_SURFACES = {}


def surfaces(character, keyvert_ids=None) -> tuple:
    """(``setup(character, keyvert_ids)``, ``every_vertex`` of it), computed once per live character, key-vertex set
    and module settings (a retarget measures its source once and its target twice). Shared: never modify them."""
    kv = None if keyvert_ids is None else np.asarray(keyvert_ids, np.int64)

    def compute():
        surf = setup(character, kv)
        mesh = character.mesh
        return surf, every_vertex(surf, mesh.rest_verts[surf.ids], mesh.rest_normals[surf.ids])
    return per_character(_SURFACES, character, compute, None if kv is None else kv.tobytes())


def every_vertex(surf: BodySurface, rest: np.ndarray, rest_normals: np.ndarray) -> BodySurface:
    """``surf`` with every one of its surface vertices a probe (``rest``, ``rest_normals``: theirs in the bind pose,
    (M, 3)): what the contact depth reads around the key vertices (``near_depths``). Its
    ``probe_area`` is each vertex's equal share of the surface's area: it stands for no volume."""
    M = len(surf.ids)
    every = surf._replace(probe=np.arange(M), probe_area=np.full(M, float(surf.probe_area.sum()) / max(M, 1)),
                          rest_depth=np.zeros(M))
    x = torch.as_tensor(rest, dtype=torch.float32)[None]
    n = torch.as_tensor(rest_normals, dtype=torch.float32)[None]
    return every._replace(rest_depth=depths(every, x, n, subtract_rest=False)[0].numpy())


def _boxes(x: torch.Tensor, part: torch.Tensor, G: int):
    """Per frame and part, the box of its surface vertices: (B, G, 3) minima and maxima (x (B, M, 3))."""
    B = x.shape[0]
    idx = part[None, :, None].expand(B, -1, 3)
    lo = torch.full((B, G, 3), float("inf"), dtype=x.dtype).scatter_reduce(1, idx, x, "amin")
    hi = torch.full((B, G, 3), float("-inf"), dtype=x.dtype).scatter_reduce(1, idx, x, "amax")
    return lo, hi


def depths(surf: BodySurface, x: torch.Tensor, normals, subtract_rest: bool = True, only=None,
           boxes: tuple = None) -> torch.Tensor:
    """(B, S) depth of each probe inside the union of the parts it is read against, ≥ 0 (armature units).

    x: (B, M, 3) the surface vertices' positions on B frames (``surf.ids``'s order); normals: (B, M, 3) their unit
    normals, or a function of (frame indices (K,), vertex indices (K,)) -> (K, 3) unit normals; only: (B, S) bool,
    the (frame, probe) entries to read (the others read 0), or None: every entry; boxes: ``_boxes(x, part, G)``
    where the caller has them."""
    if torch.is_tensor(normals):
        n_all = normals
        normals = lambda b, q: n_all[b, q]                                   # noqa: E731
    B, M = x.shape[:2]
    G = surf.allowed.shape[0]
    S = len(surf.probe)
    out = torch.zeros((B, S), dtype=x.dtype)
    if G == 0 or S == 0:
        return out
    part = torch.as_tensor(surf.part)
    probe = torch.as_tensor(surf.probe)
    pg = part[probe]                                                          # (S,) the probes' parts
    p = x[:, probe]                                                           # (B, S, 3)
    lo, hi = _boxes(x, part, G) if boxes is None else boxes
    allowed = torch.as_tensor(surf.allowed)
    # broad phase: probes of a part whose box meets an allowed part's box, then each of them against those boxes
    meet = ((lo[:, :, None] <= hi[:, None]) & (lo[:, None] <= hi[:, :, None])).all(-1) & allowed[None]  # (B, G, G)
    candidate = meet.any(-1)[:, pg]                                           # (B, S)
    b1, s1 = torch.nonzero(candidate if only is None else candidate & only, as_tuple=True)
    k1, cc = torch.nonzero(meet[b1, pg[s1]], as_tuple=True)                 # (candidate, part) whose boxes meet
    q1, bk = p[b1[k1], s1[k1]], b1[k1]
    inside = ((q1 >= lo[bk, cc]) & (q1 <= hi[bk, cc])).all(-1)               # the candidate in that part's box
    k1, cc = k1[inside], cc[inside]
    if len(k1) == 0:
        return out
    bb, ss = b1[k1], s1[k1]
    best_d = torch.full((len(bb),), float("inf"), dtype=x.dtype)
    best_q = torch.zeros(len(bb), dtype=torch.long)
    for c in torch.unique(cc).tolist():
        sel = torch.nonzero(cc == c)[:, 0]                                    # sorted by frame
        verts = torch.nonzero(part == c)[:, 0]
        xc = x[:, verts]                                                      # (B, n_c, 3)
        b_ = bb[sel]
        counts = torch.bincount(b_, minlength=B)
        rank = torch.arange(len(sel)) - (torch.cumsum(counts, 0) - counts)[b_]
        P = torch.zeros((B, int(counts.max()), 3), dtype=x.dtype)          # each frame's probes, padded
        P[b_, rank] = p[b_, ss[sel]]
        step = max(1, _BLOCK // max(P.shape[1] * len(verts), 1))
        for f in range(0, B, step):
            X, Q = xc[f:f + step], P[f:f + step]
            # |Q - X|² − |Q|²: the nearest vertex without the row's constant, which is added to the minimum
            d2 = torch.baddbmm((X * X).sum(-1)[:, None], Q, X.transpose(1, 2), alpha=-2.0)
            dmin, arg = d2.min(-1)                                            # (F, K)
            dmin = dmin + (Q * Q).sum(-1)
            m = (b_ >= f) & (b_ < f + step)
            best_d[sel[m]] = dmin[b_[m] - f, rank[m]]
            best_q[sel[m]] = verts[arg[b_[m] - f, rank[m]]]
    # per probe and frame, the nearest vertex over its candidate parts
    key = bb * S + ss
    nearest = torch.full((B * S,), float("inf"), dtype=x.dtype).scatter_reduce(0, key, best_d, "amin")
    win = best_d <= nearest[key]
    bb, ss, q = bb[win], ss[win], best_q[win]
    d = -((p[bb, ss] - x[bb, q]) * normals(bb, q)).sum(-1)
    d = torch.where(torch.as_tensor(surf.rim)[pg[ss], q], torch.zeros_like(d), d).clamp_min(0.0)
    out.reshape(-1).scatter_reduce_(0, bb * S + ss, d, "amax")
    if subtract_rest:
        out = (out - torch.as_tensor(surf.rest_depth, dtype=x.dtype)[None]).clamp_min(0.0)
    return out


def shared_volume(surf: BodySurface, d: torch.Tensor) -> torch.Tensor:
    """(B,) volume shared by parts that do not share a joint region, ½ Σ depth · area, from ``depths`` (B, S)
    (armature units³)."""
    return 0.5 * (d * torch.as_tensor(surf.probe_area, dtype=d.dtype)).sum(-1)


def near_depths(every: BodySurface, x: torch.Tensor, normals, keys: torch.Tensor, radius: float,
                read: torch.Tensor, also: torch.Tensor = None, boxes: tuple = None) -> tuple:
    """The depth around key vertices, read on **every** vertex of ``every`` (``every_vertex``) within ``radius``
    (armature units) of a key vertex read, not only on the volume's probes (a hand sunk where no probe lies).

    keys: (B, N, 3) the key vertices; read: (B, N) bool, the entries read; also: (M,) bool, vertices read on every
    frame besides (the volume's probes, so that one search serves both measures); x, normals, boxes as ``depths``'.
    Returns (d (B, M) each vertex's depth where read, 0 elsewhere; (B, N) the deepest vertex within ``radius`` of
    each key vertex on the entries read, 0 elsewhere). The (frames, entries, M) distances: a block of frames at a
    time."""
    B, N = keys.shape[:2]
    M = x.shape[1]
    b, k = torch.nonzero(read, as_tuple=True)                                # sorted by frame
    key_depth = torch.zeros((B, N), dtype=x.dtype)
    counts = torch.bincount(b, minlength=B)
    width = int(counts.max()) if len(b) else 0
    rank = torch.arange(len(b)) - (torch.cumsum(counts, 0) - counts)[b]
    only = torch.zeros((B, M), dtype=torch.bool)
    near = torch.zeros((B, width, M), dtype=torch.bool)                      # each frame's entries read, padded
    if width:
        K = torch.zeros((B, width, 3), dtype=x.dtype)
        K[b, rank] = keys[b, k]
        valid = torch.zeros((B, width), dtype=torch.bool)
        valid[b, rank] = True
        step = max(1, _BLOCK // max(width * M, 1))
        for f in range(0, B, step):
            X, Q = x[f:f + step], K[f:f + step]
            d2 = torch.baddbmm((X * X).sum(-1)[:, None], Q, X.transpose(1, 2), alpha=-2.0)   # |Q - X|² − |Q|²
            near[f:f + step] = (d2 < (radius * radius - (Q * Q).sum(-1))[..., None]) & valid[f:f + step, :, None]
        only = near.any(1)
    if also is not None:
        only |= also[None]
    d = depths(every, x, normals, only=only, boxes=boxes)                                          # (B, M)
    if width:
        key_depth[b, k] = torch.where(near, d[:, None], torch.zeros(())).amax(-1)[b, rank]
    return d, key_depth


class MeshMeasures(NamedTuple):
    """Per-frame mesh measures of one clip (``mesh_measuring``).

    share (T,) shared volume over the body's volume; hand_touch (T, N) bool: a hand key vertex lies within
    ``radius`` of a probe of a part that does not share a joint region with the hand (False for other key vertices);
    key_depth (T, N) the deepest surface vertex within ``radius`` of each key vertex (``near_depths``; metres) on
    the entries read, 0 elsewhere; hand_gap (T, 2, R) each hand's distance to each body region's surface and
    hand_depth (T, 2, R) how deep inside it (``core.metrics.hand_contacts.region_gaps``; metres, the gap +inf
    beyond the frame's ``hand_margin``).
    """

    share: np.ndarray
    hand_touch: np.ndarray
    key_depth: np.ndarray
    hand_gap: np.ndarray
    hand_depth: np.ndarray


def skinning(track: ClipTrack, ids: np.ndarray):
    """Dense-weight LBS of the surface vertices, float32, armature space: a function of (frame slice, skinning
    rotations, translations) -> positions, unit normals (B, M, 3)."""
    mesh, J = track.character.mesh, track.character.skeleton.num_bones
    W = torch.as_tensor(mesh.dense_weights(J)[ids], dtype=torch.float32)
    used = torch.nonzero(W.abs().sum(0) > 0)[:, 0]
    W = W[:, used]
    v = torch.as_tensor(mesh.rest_verts[ids], dtype=torch.float32)
    nr = torch.as_tensor(mesh.rest_normals[ids], dtype=torch.float32)

    def run(S_rot, S_t):
        S = torch.cat([S_rot.reshape(S_rot.shape[:-2] + (9,)), S_t], -1).to(torch.float32)[:, used]
        blend = W @ S                                                        # (B, M, 12): rows of R, then t
        x = blend[..., 0:9:3] * v[:, 0:1] + blend[..., 1:9:3] * v[:, 1:2] + blend[..., 2:9:3] * v[:, 2:3] \
            + blend[..., 9:]

        def normals(b, q):                                                    # only where a depth is read
            n = (blend[b, q, :9].reshape(-1, 3, 3) @ nr[q][..., None])[..., 0]
            return n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return x, normals
    return run


def _digest(a: np.ndarray) -> str:
    """A key for a bool array: its bits and its shape."""
    return hashlib.sha1(np.packbits(a).tobytes() + str(a.shape).encode()).hexdigest()


def mesh_measuring(track: ClipTrack, keyvert_ids=None, radius: float = 0.0, read: np.ndarray = None,
                   own_touch: bool = False, hand_margin: np.ndarray = None):
    """Generator yielding the share of frames done; returns the clip's MeshMeasures (kept on the track).

    Args:
        radius: the key vertices' neighbourhood (metres; the contacts' d_min).
        read: (T, N) bool, the (frame, key vertex) entries whose depth around is read (the source's contacts:
            ``core.metrics.contact_depth.contact_entries``), or None: none.
        own_touch: read also the entries where this clip's hand key vertices touch its body (``hand_touch``; the
            source's own hand contacts, when measuring the source).
        hand_margin: (T,) metres: how far each frame's hand gaps are read (``hand_gap``); None: none read.
    """
    kv = None if keyvert_ids is None else np.asarray(keyvert_ids, dtype=np.int64)
    wanted = None if read is None else np.array(read, bool)        # a copy: the caller may change its own
    margin = None if hand_margin is None else np.array(hand_margin, np.float64)
    key = ("mesh_measures", None if kv is None else kv.tobytes(), float(radius), bool(own_touch),
           None if wanted is None else _digest(wanted), None if margin is None else margin.tobytes())

    def compute():
        surf, every = surfaces(track.character, kv)
        T, N = track.num_frames, len(surf.key)
        share = np.zeros(T)
        touch = np.zeros((T, N), bool)
        key_depth = np.zeros((T, N))
        hand_gap = np.full((T, len(HANDS), len(REGIONS)), np.inf)
        hand_depth = np.zeros((T, len(HANDS), len(REGIONS)))
        hands = hand_surface(surf.part, surf.bones, surf.allowed, surf.rim)
        part = torch.as_tensor(surf.part)
        skin = skinning(track, surf.ids)
        r = radius / surf.scale
        ok = surf.key >= 0
        kpos = torch.as_tensor(np.maximum(surf.key, 0))
        hand = torch.as_tensor(surf.key_hand & ok)
        probe = torch.as_tensor(surf.probe)
        is_probe = torch.zeros(len(surf.ids), dtype=torch.bool)
        is_probe[probe] = True
        far = torch.as_tensor(surf.allowed)[torch.as_tensor(surf.part[kpos.numpy()])][:, surf.part[surf.probe]]
        with torch.no_grad():
            for sl, S_rot, S_t in track.skinning_chunks(_CHUNK):
                x, n = skin(S_rot, S_t)
                if N and bool(hand.any()):                                   # (B, N, S) hand key vertex near a probe
                    near = torch.cdist(x[:, kpos[hand]], x[:, probe]) < r
                    touch[sl, hand.numpy()] = (near & far[hand][None]).any(-1).numpy()
                entries = np.zeros((sl.stop - sl.start, N), bool) if wanted is None else wanted[sl].copy()
                if own_touch:
                    entries |= touch[sl]
                boxes = _boxes(x, part, surf.allowed.shape[0])               # each part's, shared by the reads
                d, kd = near_depths(every, x, n, x[:, kpos], r, torch.as_tensor(entries & ok), also=is_probe,
                                    boxes=boxes)
                share[sl] = (shared_volume(surf, d[:, probe]) / max(surf.volume, 1e-30)).numpy()
                key_depth[sl] = kd.numpy() * surf.scale
                if margin is not None:
                    m = torch.as_tensor(margin[sl] / surf.scale, dtype=x.dtype)
                    gap, depth = region_gaps(hands, x, n, m, boxes)
                    hand_gap[sl] = gap.double().numpy() * surf.scale
                    hand_depth[sl] = depth.double().numpy() * surf.scale
                yield sl.stop / T
        return MeshMeasures(share, touch, key_depth, hand_gap, hand_depth)
    return (yield from track.memo_steps(key, compute))


__all__ = ["BodySurface", "HOPS", "MeshMeasures", "PROBE_MAX", "SAMPLE_CELL", "SURFACE_MAX", "depths", "every_vertex",
           "mesh_measuring", "mesh_volume", "near_depths", "setup", "shared_volume", "skinning", "surfaces"]
