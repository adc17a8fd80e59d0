"""The body's surface as the self barrier reads it (``surface.py``): per character, once, a signed distance field
of its rest surface for each torso, head, thigh and arm segment (``FIELD_SEGMENTS``), sampled on a regular grid in its
bone's frame, and the probe points spread over its hands, arms and chest (docs/solver.md "Self barrier").

A field is the distance to the nearest vertex's tangent plane, negative inside, kept only where that nearest vertex
belongs to the segment, or, on the trunk, is a vertex that the segment's bone moves too (``SEAM_SEGMENTS``;
elsewhere it is "far": the interior is shared out between the segments whose surface is nearest; ``SHARED_INTERIOR``
lets segments share it). The probes are farthest-point samples of each hand's (two blocks, ``PROBE_BLOCKS``),
forearm's, upper arm's and the chest's vertices (``PROBE_SEGMENTS``), carried by their bones as the capsule ends
are; each field carries four frame points (its bone's origin and three points ``AXIS`` along its axes) from which a
step places the probes in the field's box. A probe is tested against a field only when the two segments are not
neighbours in the skeleton (``core.metrics.measures.segment_exclusion``: a forearm meets the upper arm at the elbow
without any penetration).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree   # POT's own dependency

from ..character.memo import per_character
from ..metrics.measures import segment_exclusion
from ..rig.affine import inv
from ..rig.humanoid import unsided
from ..rig.parts import segment_weights, vertex_segments
from ..rig.skinning import bind_matrices

#: segments (canonical names without their side) whose surface is a field: what a hand touches on a body, the
#: hands and forearms themselves (hands that clap, hold each other or a wrist) and the upper arms, which the chest's
#: probes read
FIELD_SEGMENTS = ("hips", "spine", "chest", "upper_chest", "neck", "head", "upper_leg", "hand", "lower_arm",
                  "upper_arm")
#: segments whose surface points probe the fields: the hands and the arms (an upper arm pressed into a big chest
#: or belly is what a viewer sees first; docs/decisions.md "The surface barrier probes the arms"), and the chest,
#: whose breasts and sides sink into an arm between the arm's own probes (docs/decisions.md "The chest probes the
#: upper arms")
PROBE_SEGMENTS = ("hand", "lower_arm", "upper_arm", "chest")
#: probe points per probe segment (farthest-point samples of its vertices: 12 leave a forearm folded against the
#: chest sinking between them, 32 an upper arm 9 mm into a chest; docs/decisions.md "A fitted body's overlaps pull no
#: pair closer"); fewer on a low-poly mesh, as many on every segment as its smallest one has vertices
PROBES = 48
#: a segment with fewer vertices carries no probes
MIN_PROBES = 12
#: blocks of ``PROBES`` probes per probe segment, by canonical name without the side (1 where not named), each block
#: a part of the segment along its length; fewer where the segment has fewer vertices. Two on a hand: 48 points leave a
#: long-armed body's hand sunk 2 cm into its other forearm between them (docs/decisions.md "The trunk's seams are read
#: by both fields, and a hand carries 96 probes")
PROBE_BLOCKS = {"hand": 2}
#: segments whose fields share the body's interior: inside the body, a node nearest to any of them reads its
#: depth in each of their fields, so a probe pressed into the crease where two of them meet (hips and thigh, spine
#: and chest) reads its full depth, where a field keeping only its own segment's part blends depth with "far".
#: Off by default (an experiment sets ("hips", "spine", "chest", "upper_chest", "upper_leg") with ``--const``):
#: docs/decisions.md "The trunk and thigh fields do not share the interior, yet"
SHARED_INTERIOR = ()
#: a field's surface without the limbs whose probes read that field (an arm, for the chest's field): where a limb
#: lies at rest says nothing of where it is when animated, and a node inside a chest whose nearest rest vertex is
#: the arm resting against it reads "far". Off by default (False: every segment's vertices): it reads those nodes
#: right but measured no better (docs/decisions.md "The trunk and thigh fields do not share the interior, yet")
WITHOUT_PROBING_LIMBS = False
#: where segments share the interior (``SHARED_INTERIOR``), a node nearest to a neighbour's vertex reads its depth in
#: this segment's field only where this segment's own nearest vertex is at most this share of the height farther
#: (the seam, where the two bones' frames still agree; deeper in the neighbour, the field would carry a copy of the
#: neighbour's interior with the wrong bone). 0: the whole interior (an experiment, with ``--const``)
SHARED_BAND = 0.0
#: segments whose fields also keep the nodes nearest to a vertex of one of them that their own bone moves with at least
#: ``SEAM_WEIGHT`` of its skin weight: where the chest meets the upper chest, the blended vertices belong to both
#: fields, so the seam of a bent trunk is read by one field or the other, where each field alone reads "far" (each
#: field's copy of such a vertex is off by the share of the bend the other bone makes). () or 0: off
#: (docs/decisions.md "The trunk's seams are read by both fields, and a hand carries 96 probes")
SEAM_SEGMENTS = ("spine", "chest", "upper_chest")
SEAM_WEIGHT = 0.3
#: grid nodes along each axis of a field
GRID = 28
#: a field's box: its segment's vertices' bounds grown by this share of the body's height (2 % spreads the nodes
#: closer but leaves a bent neighbour's seam unread: docs/decisions.md "A field's box stays grown by 4 % of the height")
MARGIN = 0.04
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
        per_segment: probes per block (the probes are in blocks of this many, ``PROBE_BLOCKS`` per segment, one
            by default).
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
    per_segment: int

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
    """``character``'s SurfaceFields (computed once per character object and setting of this module's constants, so
    that an experiment may change them between solves), or None without a mesh or without a pair of segments to
    test."""
    return per_character(_FIELDS, character, lambda: _surface_fields(character))


def _surface_fields(character):
    sk, mesh = character.skeleton, character.mesh
    if mesh is None:
        return None
    seg, names, bone_ids = vertex_segments(sk, mesh, character.bone_map)
    body = seg >= 0
    V, N = mesh.rest_verts, mesh.rest_normals
    scale = sk.metres_per_unit
    height = float(np.ptp(V[body, 2])) * scale if body.any() else 0.0
    fields = [s for s, n in enumerate(names) if unsided(n) in FIELD_SEGMENTS and (seg == s).sum() >= 20]
    probes = [s for s, n in enumerate(names) if unsided(n) in PROBE_SEGMENTS and (seg == s).sum() >= MIN_PROBES]
    if not fields or not probes:
        return None
    per_segment = min([PROBES] + [int((seg == s).sum()) for s in probes])     # a low-poly arm: fewer probes
    excl = segment_exclusion(names)
    tested = np.array([[not excl[p, f] for f in fields] for p in probes], dtype=bool)
    if not tested.any():
        return None
    G = bind_matrices(sk, mesh)
    shared = {s for s, n in enumerate(names) if unsided(n) in SHARED_INTERIOR}
    seam_parts = [s for s, n in enumerate(names) if unsided(n) in SEAM_SEGMENTS] if SEAM_WEIGHT > 0 else []
    weights = segment_weights(sk, mesh, character.bone_map) if seam_parts else None
    lo, hi, grids = [], [], []
    lin = np.linspace(0.0, 1.0, GRID)
    trees = {}                     # the surface a field is read against, by the segments it leaves out
    for k, s in enumerate(fields):
        probing = tuple(p for i, p in enumerate(probes) if tested[i, k]) if WITHOUT_PROBING_LIMBS else ()
        if probing not in trees:
            surface = body & ~np.isin(seg, probing)
            trees[probing] = cKDTree(V[surface]), N[surface], seg[surface], surface
        tree, body_n, body_seg, surface = trees[probing]
        Binv = inv(G[bone_ids[s]])
        local = V[seg == s] @ Binv[:3, :3].T + Binv[:3, 3]
        pad = MARGIN * height / scale
        a, b = local.min(0) - pad, local.max(0) + pad
        z, y, x = np.meshgrid(a[2] + lin * (b[2] - a[2]), a[1] + lin * (b[1] - a[1]), a[0] + lin * (b[0] - a[0]),
                              indexing="ij")
        nodes = np.stack([x, y, z], -1).reshape(-1, 3) @ G[bone_ids[s]][:3, :3].T + G[bone_ids[s]][:3, 3]
        own = shared if s in shared else {s}
        seam = None
        if s in shared and SHARED_BAND > 0:      # the neighbours' interior only near this segment's own surface
            seam = (s, cKDTree(V[seg == s]), SHARED_BAND * height / scale)
        also = None
        if s in seam_parts:                       # the blended vertices where it meets another seam segment
            also = np.isin(body_seg, seam_parts) & (weights[surface, s] >= SEAM_WEIGHT)
        grids.append(_signed_distance(nodes, tree, body_n, body_seg, own, seam, also).reshape(GRID, GRID, GRID)
                     * scale)
        lo.append(a)
        hi.append(b)
    grid = np.minimum(np.stack(grids), FAR * height)
    p_bone, p_local, p_names, counts = [], [], [], []
    for s in probes:
        ids = np.nonzero(seg == s)[0]
        blocks = max(1, min(int(PROBE_BLOCKS.get(unsided(names[s]), 1)), len(ids) // per_segment))
        pick = ids[farthest_points(V[ids], blocks * per_segment)]
        if blocks > 1:                                  # each block a spatial part of the segment: a tight sphere
            pick = pick[_split_order(V[pick])]
        Binv = inv(G[bone_ids[s]])
        p_bone += [bone_ids[s]] * len(pick)
        p_local.append(V[pick] @ Binv[:3, :3].T + Binv[:3, 3])
        p_names += [names[s]] * len(pick)
        counts.append(len(pick))
    tested_q = np.repeat(tested, counts, axis=0)
    return SurfaceFields(np.array([bone_ids[s] for s in fields], dtype=np.int64), tuple(names[s] for s in fields),
                         np.array(lo), np.array(hi), grid, np.array(p_bone, dtype=np.int64), np.concatenate(p_local),
                         tuple(p_names), tested_q, height, per_segment)


def _signed_distance(nodes: np.ndarray, tree: cKDTree, normals: np.ndarray, vert_seg: np.ndarray,
                     own, seam=None, also=None) -> np.ndarray:
    """(M,) float64: each node's (M, 3) signed distance (armature units) to the tangent plane of its nearest
    vertex (``tree`` over the body's vertices), where that vertex is of a segment in ``own``; +inf where it is
    another segment's. ``seam``: (the field's segment, a tree of its vertices, a band in armature units): a node
    nearest to another segment of ``own`` keeps its distance only where the field's segment's nearest vertex is at
    most the band farther than the nearest vertex (``SHARED_BAND``). ``also``: (V,) bool over the tree's vertices, kept
    whatever their segment (``SEAM_WEIGHT``)."""
    dist, k = tree.query(nodes)
    d = ((nodes - tree.data[k]) * normals[k]).sum(-1)
    keep = np.isin(vert_seg[k], list(own))
    if seam is not None:
        segment, mine, band = seam
        keep &= (vert_seg[k] == segment) | (mine.query(nodes)[0] <= dist + band)
    if also is not None:
        keep |= also[k]
    return np.where(keep, d, np.inf)


def _split_order(P: np.ndarray) -> np.ndarray:
    """Indices ordering points P (V, 3) along their principal axis (so that consecutive blocks of them are parts of
    the cloud, not samples spread over all of it)."""
    centred = P - P.mean(0)
    return np.argsort(centred @ np.linalg.svd(centred, full_matrices=False)[2][0], kind="stable")


def farthest_points(P: np.ndarray, k: int) -> np.ndarray:
    """Indices of ``k`` farthest-point samples of points P (V, 3), starting from the point farthest from their
    centroid."""
    chosen = [int(np.argmax(((P - P.mean(0)) ** 2).sum(1)))]
    d = ((P - P[chosen[0]]) ** 2).sum(1)
    while len(chosen) < min(k, len(P)):
        chosen.append(int(np.argmax(d)))
        d = np.minimum(d, ((P - P[chosen[-1]]) ** 2).sum(1))
    return np.array(chosen)


def world_points(fields: SurfaceFields, track) -> torch.Tensor:
    """(T, 4F + Q, 3) float64 world positions of ``fields.carried_points()`` over a ClipTrack's clip."""
    bones, local = fields.carried_points()
    R, P = track.arm_rotations[:, bones], track.arm_positions[:, bones]
    arm = (R @ torch.as_tensor(local, dtype=R.dtype)[..., None])[..., 0] + P
    M = torch.as_tensor(track.character.skeleton.object_matrix, dtype=R.dtype)
    return arm @ M[:3, :3].T + M[:3, 3]
