"""Which body part a bone or a mesh vertex belongs to (placeholder: track A replaces this module)."""

from __future__ import annotations

import numpy as np

from .humanoid import CORE_BONES


def vertex_segments(skeleton, mesh, bone_map) -> tuple:
    """Canonical core bone of each vertex (its dominant bone or the nearest mapped core ancestor).

    Returns (seg (V,) int index into ``bones`` or -1, bones list of canonical names, bone indices).
    """
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
    return owner[mesh.dominant_bones()], bones, [skeleton.index(bone_map[c]) for c in bones]
