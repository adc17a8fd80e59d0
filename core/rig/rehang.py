"""Rigs whose mapped bones do not hang where the canonical humanoid puts them: the core works on a re-hung copy.

Game rigs often parent their deforming feet (IK feet) to the root instead of the shin. Every part of the method
that poses a bone through its parents (copy-rotations, the solver's key vertices, the fitted body) would then
move the feet with the root and tear the leg apart. A mapped bone is *disconnected* when the nearest mapped bone
up its canonical chain (``core.rig.humanoid.CANONICAL_PARENT``: the lower leg for a foot, the foot for the toes) is
not one of its ancestors in the rig. ``rehang(skeleton, bone_map)`` returns a ``Rehung`` whose ``skeleton`` hangs
each disconnected bone (with its subtree) from that canonical parent, rest pose unchanged (every bone keeps its
rest matrix in armature space), bones reordered parent-first; its methods convert pose channels both ways
without changing any bone's transform in armature space, and remap skin weights to the new bone order.

    rh = rehang(skeleton, bone_map)          # None when every mapped bone hangs where it should
    core_motion = rh.to_core(rig_motion)     # the scene's channels -> the re-hung skeleton's
    rig_motion = rh.to_rig(core_motion)      # back, for writing an Action on the real rig
"""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np

from .affine import inv
from .humanoid import CANONICAL_PARENT
from .rotations_np import matrix_to_quat, quat_make_continuous, quat_to_matrix
from ..types import Motion, Skeleton, SkinnedMesh


#: canonical parts that are re-hung when disconnected: the ends of the limbs (a spine beside the hips, as some
#: rigs have it, is a design of the rig, not a limb torn off)
REHUNG_PARTS = ("lower_arm", "hand", "lower_leg", "foot", "toes")


def disconnected_bones(skeleton: Skeleton, bone_map: dict) -> dict:
    """{bone index: index of the bone it should hang from} for the mapped limb ends (``REHUNG_PARTS``) whose
    nearest mapped canonical ancestor is not an ancestor of theirs in the rig (nor one of their descendants)."""
    names = skeleton.names
    index = {n: i for i, n in enumerate(names)}
    out = {}
    for canon, bone in bone_map.items():
        j = index.get(bone)
        if j is None or canon.partition("_")[2] not in REHUNG_PARTS:
            continue
        p = CANONICAL_PARENT.get(canon)
        while p is not None and bone_map.get(p) not in index:
            p = CANONICAL_PARENT.get(p)
        if p is None:
            continue
        k = index[bone_map[p]]
        if k == j or _is_ancestor(skeleton.parents, k, j) or _is_ancestor(skeleton.parents, j, k):
            continue
        out[j] = k
    return out


def _is_ancestor(parents, a: int, b: int) -> bool:
    """True when bone ``a`` is a strict ancestor of bone ``b``."""
    b = int(parents[b])
    while b >= 0:
        if b == a:
            return True
        b = int(parents[b])
    return False


def _global(rest_local: np.ndarray, parents: np.ndarray, rot: np.ndarray, loc: np.ndarray, bones) -> dict:
    """{bone: (T, 4, 4) armature-space matrix} of ``bones`` and their ancestors for basis rotations (T, J, 3, 3)
    and locations (T, J, 3) (``core.rig.kinematics``' rule: parent @ rest_local @ basis)."""
    out = {}

    def get(j):
        if j not in out:
            B = np.zeros(rot.shape[:1] + (4, 4))
            B[:, :3, :3] = rot[:, j]
            B[:, :3, 3] = loc[:, j]
            B[:, 3, 3] = 1.0
            local = rest_local[j] @ B
            p = int(parents[j])
            out[j] = local if p < 0 else get(p) @ local
        return out[j]
    for j in bones:
        get(int(j))
    return out


class Rehung:
    """A rig and its re-hung copy (see the module docstring).

    Attributes:
        rig: the Skeleton as the scene has it.
        skeleton: the re-hung Skeleton the core works on (same names, reordered parent-first).
        order: (J,) int64, core bone i is rig bone ``order[i]``.
        moved: {core bone index: rig name of the bone it now hangs from} of the re-hung bones.
    """

    def __init__(self, rig: Skeleton, moved: dict):
        J = rig.num_bones
        parents = rig.parents.copy()
        for j, k in moved.items():
            parents[j] = k
        children = [[] for _ in range(J)]
        for j, p in enumerate(parents):
            if p >= 0:
                children[p].append(j)
        heap = [j for j in range(J) if parents[j] < 0]
        heapq.heapify(heap)
        order = []
        while heap:                                    # parent-first, otherwise in the rig's own order
            j = heapq.heappop(heap)
            order.append(j)
            for c in children[j]:
                heapq.heappush(heap, c)
        self.rig = rig
        self.order = np.asarray(order, dtype=np.int64)
        self.inverse = np.argsort(self.order)
        G = rig.rest_global[self.order]
        new_parents = np.array([self.inverse[parents[j]] if parents[j] >= 0 else -1 for j in order], np.int64)
        rest_local = np.stack([G[i] if p < 0 else inv(G[p]) @ G[i] for i, p in enumerate(new_parents)])
        self.skeleton = Skeleton(rig.name, [rig.names[j] for j in order], new_parents, rest_local,
                                 rig.object_matrix)
        self.moved = {int(self.inverse[j]): rig.names[k] for j, k in moved.items()}

    def describe(self) -> str:
        """One line naming each re-hung bone, its rig parent and the bone it is solved under."""
        parts = []
        for i, new_parent in sorted(self.moved.items()):
            j = self.order[i]
            p = self.rig.parents[j]
            parts.append(f"'{self.rig.names[j]}' (on '{self.rig.names[p]}' in the rig)" if p >= 0 else
                         f"'{self.rig.names[j]}' (a root bone in the rig)")
            parts[-1] += f" as a child of '{new_parent}'"
        return (f"'{self.rig.name}': solved with " + ", ".join(parts) + "; written back to each bone's own "
                "parent, the same pose.")

    def mesh(self, mesh: SkinnedMesh) -> SkinnedMesh:
        """``mesh`` with its skin weights pointing at the re-hung skeleton's bone indices."""
        if mesh is None:
            return None
        return replace(mesh, weight_bones=self.inverse[mesh.weight_bones])

    def _convert(self, motion: Motion, src: Skeleton, dst: Skeleton, to_dst: np.ndarray, bones) -> Motion:
        """``motion`` of skeleton ``src`` as channels of ``dst`` (dst bone i is src bone ``to_dst[i]``); only
        ``bones`` (dst indices) change beyond the reordering: their basis is recomputed from armature space."""
        rot = quat_to_matrix(motion.rotations)                                   # (T, J, 3, 3)
        loc = motion.locations
        src_index = {n: i for i, n in enumerate(src.names)}
        need = set()
        for i in bones:
            need.add(src_index[dst.names[i]])
            p = dst.parents[i]
            if p >= 0:
                need.add(src_index[dst.names[p]])
        G = _global(src.rest_local, src.parents, rot, loc, sorted(need))
        out_q = motion.rotations[:, to_dst].copy()
        out_l = loc[:, to_dst].copy()
        for i in bones:
            own = G[src_index[dst.names[i]]]
            p = dst.parents[i]
            rel = own if p < 0 else inv(G[src_index[dst.names[p]]]) @ own
            basis = inv(dst.rest_local[i]) @ rel
            out_q[:, i] = quat_make_continuous(matrix_to_quat(basis[:, :3, :3]))
            out_l[:, i] = basis[:, :3, 3]
        return Motion(out_q, out_l, motion.fps, motion.frame_start)

    def to_core(self, motion: Motion) -> Motion:
        """Channels of the rig (T, J, ...) -> channels of the re-hung skeleton: the same armature-space pose."""
        return self._convert(motion, self.rig, self.skeleton, self.order, sorted(self.moved))

    def to_rig(self, motion: Motion) -> Motion:
        """Channels of the re-hung skeleton -> the rig's: the same armature-space pose, for writing."""
        return self._convert(motion, self.skeleton, self.rig, self.inverse,
                             sorted(int(self.order[i]) for i in self.moved))


def rehang(skeleton: Skeleton, bone_map: dict):
    """A ``Rehung`` for a rig with disconnected mapped bones, or None when every mapped bone hangs from its
    canonical parent's bone (or an unmapped bone below it)."""
    moved = disconnected_bones(skeleton, bone_map)
    return Rehung(skeleton, moved) if moved else None


__all__ = ["REHUNG_PARTS", "Rehung", "disconnected_bones", "rehang"]
