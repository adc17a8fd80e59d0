"""Which body part a bone or a mesh vertex belongs to, through the bone map.

A bone's part is its canonical name (``bone_canonical``): its own mapping, else its nearest mapped ancestor's
(a jaw under the head is head, a twist bone under the forearm is lower arm).

A vertex has two readings, because two consumers ask two different questions, and a third, finer one:

- **limb** (``limb_labels``): the limb (``core.rig.humanoid.LIMBS``: torso, head, arms, hands, legs, feet, left and
  right separate) with the highest *summed* skin weight over all the vertex's bones. It is the limb split of
  the key-vertex transfer (ReConForM §3.1, step 1 of the transfer): each limb's cloud is matched by optimal
  transport to the template's, so a vertex at a joint must go to the limb that moves it most as a whole, even
  when its single heaviest bone belongs to the neighbouring limb. Callers: ``core.keyverts`` (the transfer,
  the template's own labels, ``character_height``'s body mask, the template's definition rules).
- **segment** (``vertex_segments``): the canonical *core* bone (``core.rig.humanoid.CORE_BONES``, no fingers) of
  the vertex's *dominant* bone (``SkinnedMesh.dominant_bones``), or of its nearest ancestor mapped to a core
  bone. Finer than a limb (upper arm vs forearm), it is what a capsule or a foot is fitted to. Callers:
  ``core.metrics.scores`` (the per-segment capsules of the self-penetration measure and the foot vertices of the
  foot metrics; it still has its own copy, ``metrics._segment_of_vertices``, until it switches to this one).
  ``core.contacts.ground`` and ``core.solver`` pick foot vertices the same way (dominant bone among the mapped
  foot/toes bones) directly from ``SkinnedMesh.dominant_bones``.
- **segment weights** (``segment_weights``): the vertex's summed skin weight on each segment's bones, for the
  vertices that two segments move together (the self barrier's trunk fields share them, ``core.solver.surface_fields``).

Pure numpy.
"""

from __future__ import annotations

import numpy as np

from .humanoid import CORE_BONES, LIMBS, limb_of
from ..types import Skeleton, SkinnedMesh


def bone_canonical(skeleton: Skeleton, bone_map: dict) -> list:
    """Canonical name per bone: its own mapping, else its nearest mapped ancestor's, else None.

    Returns a list of J entries (canonical name or None), in skeleton order.
    """
    inv = {b: c for c, b in bone_map.items()}
    out = []
    for j, name in enumerate(skeleton.names):
        c = inv.get(name)
        if c is None and skeleton.parents[j] >= 0:
            c = out[skeleton.parents[j]]
            # a child of a mapped finger/toe chain stays in it; a child of 'head' (jaw, eyes) stays head
        out.append(c)
    return out


def limb_labels(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict) -> np.ndarray:
    """(V,) index into ``LIMBS`` of each vertex (highest summed limb weight), -1 when unweighted/unmapped."""
    canon = bone_canonical(skeleton, bone_map)
    bone_limb = np.array([LIMBS.index(limb_of(c)) if c is not None else -1 for c in canon])
    Wl = _summed_weights(mesh, bone_limb, len(LIMBS))
    lab = np.argmax(Wl, 1)
    lab[Wl.max(1) <= 1e-9] = -1
    return lab


def _summed_weights(mesh: SkinnedMesh, bone_group: np.ndarray, groups: int) -> np.ndarray:
    """(V, groups) float64: each vertex's skin weights summed over the bones of each group (``bone_group`` (J,) the
    group of each bone, -1 for none: its weight counts in no group)."""
    V = mesh.num_verts
    out = np.zeros((V, groups + 1))
    g = bone_group[mesh.weight_bones]
    np.add.at(out, (np.repeat(np.arange(V), g.shape[1]), np.where(g < 0, groups, g).ravel()),
              mesh.weight_values.ravel())
    return out[:, :-1]


def _segment_owner(skeleton: Skeleton, bone_map: dict) -> tuple:
    """(owner (J,) int index into ``bones`` of each bone's canonical core bone (its own, or its nearest mapped
    ancestor's), -1 when none; bones: the mapped canonical core names, in ``CORE_BONES`` order)."""
    canon = {}
    for c, b in bone_map.items():
        if c in CORE_BONES and b in skeleton.names:
            canon[skeleton.index(b)] = c
    bones = sorted(set(canon.values()), key=CORE_BONES.index)
    owner = np.full(skeleton.num_bones, -1)
    for j in range(skeleton.num_bones):
        k = j
        while k >= 0 and k not in canon:
            k = skeleton.parents[k]
        owner[j] = bones.index(canon[k]) if k >= 0 else -1
    return owner, bones


def vertex_segments(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict) -> tuple:
    """Canonical core bone of each vertex: its dominant bone's, or that of the nearest ancestor mapped to one.

    Args:
        skeleton, mesh, bone_map: the character ({canonical name: bone name}; only ``CORE_BONES`` entries
            naming a bone of ``skeleton`` count).
    Returns:
        seg: (V,) int index into ``bones``, -1 for a vertex whose dominant bone has no mapped core ancestor;
        bones: list of the mapped canonical core names, in ``CORE_BONES`` order;
        bone_ids: list of their skeleton bone indices (same order).
    """
    owner, bones = _segment_owner(skeleton, bone_map)
    return owner[mesh.dominant_bones()], bones, [skeleton.index(bone_map[c]) for c in bones]


def segment_weights(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict) -> np.ndarray:
    """(V, S) float64: each vertex's summed skin weight on the bones of each of ``vertex_segments``' S segments
    (a vertex where the chest meets the upper chest is moved by both)."""
    owner, bones = _segment_owner(skeleton, bone_map)
    return _summed_weights(mesh, owner, len(bones))


__all__ = ["bone_canonical", "limb_labels", "segment_weights", "vertex_segments"]
