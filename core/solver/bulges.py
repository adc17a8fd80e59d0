"""Surface points where a body bulges out of its capsule cores: the self barrier's proxy for a breast, a belly or a
heavy thigh (docs/solver.md "Self barrier").

The barriers (``barrier.py``) see a body as capsule cores, one per segment, whose radius is the median distance of
the segment's vertices to its axis, so half of a segment's surface lies outside its core. Where it sticks out far
(the front of a curvy chest, a heavy belly), another limb can sink into the surface while the two cores stay apart,
and the self-penetration measure (``core.metrics.measures``: a segment's vertices inside another segment's core) counts
it: the Bandai slash onto the curvy Mixamo woman put her chest into her left upper arm's core
(``tools/experiments/diagnostics.py self-pen slash``). So each bulky segment (``BULGE_SEGMENTS``) also carries its
vertex farthest outside its core (and, with ``BULGE_POINTS`` > 1, more spread over the bulge by farthest-point
sampling) as a point, a sphere of radius 0, that the self barrier tests against the other segments' cores. It is
carried rigidly by the segment's bone, as the capsule ends are.
"""

from __future__ import annotations


import numpy as np

from ..character.memo import per_character
from ..rig.affine import inv
from ..rig.humanoid import unsided
from ..rig.parts import vertex_segments
from ..rig.skinning import bind_matrices

#: at most this many bulge points per segment (2 and 6 measured worse: the same docs/solver.md section)
BULGE_POINTS = 1
#: a vertex bulges where it lies this share of its segment's core radius or more outside the core
BULGE_MIN = 0.25

#: the segments that may bulge (canonical names without their side): the torso's and the upper limbs' (a belly, a
#: breast, a thigh). A hand's, a foot's or the head's surface sticks out of its core where it is articulated
#: (fingers, toes, a nose), not bulky
BULGE_SEGMENTS = ("hips", "spine", "chest", "upper_chest", "upper_arm", "upper_leg")

#: bulge_points per (character, capsules) by identity (both immutable while they live)
_BULGES = {}


def bulge_points(character, caps) -> tuple:
    """(segment (P,) index into ``caps``, bone (P,) skeleton index, local (P, 3) position in that bone's rest frame)
    of the points of ``character``'s surface that bulge out of its capsule cores ``caps``
    (``metrics_partners.body_capsules``); empty arrays where none does."""
    return per_character(_BULGES, character, lambda: _bulge_points(character, caps), id(caps))


def _bulge_points(character, caps) -> tuple:
    sk, mesh = character.skeleton, character.mesh
    seg, bones, _ = vertex_segments(sk, mesh, character.bone_map)
    G = bind_matrices(sk, mesh)
    scale = sk.metres_per_unit
    segs, bone, local = [], [], []
    for s, name in enumerate(caps.names):
        if unsided(name) not in BULGE_SEGMENTS:
            continue
        ids = np.nonzero(seg == bones.index(name))[0] if name in bones else np.zeros(0, np.int64)
        if not len(ids):
            continue
        Gi = inv(G[caps.bone[s]])
        loc = mesh.rest_verts[ids] @ Gi[:3, :3].T + Gi[:3, 3]                  # (V_s, 3) in the bone's rest frame
        a, b = caps.ends[s]
        ab = b - a
        t = np.clip(((loc - a) @ ab) / max(float(ab @ ab), 1e-12), 0.0, 1.0)
        r = caps.radius[s] / scale                                             # armature units, as ``loc``
        excess = np.linalg.norm(loc - (a + t[:, None] * ab), axis=1) - r
        cand = np.nonzero(excess >= BULGE_MIN * r)[0]
        if not len(cand) or BULGE_POINTS <= 0:
            continue
        x = loc[cand]
        chosen = [int(np.argmax(excess[cand]))]                               # the farthest out first
        d = np.linalg.norm(x - x[chosen[0]], axis=1)
        while len(chosen) < min(BULGE_POINTS, len(cand)) and d.max() > 0.0:
            k = int(np.argmax(d))
            chosen.append(k)
            d = np.minimum(d, np.linalg.norm(x - x[k], axis=1))
        segs += [s] * len(chosen)
        bone += [int(caps.bone[s])] * len(chosen)
        local.append(x[chosen])
    if not segs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3))
    return np.asarray(segs, np.int64), np.asarray(bone, np.int64), np.concatenate(local)


__all__ = ["BULGE_MIN", "BULGE_POINTS", "bulge_points"]
