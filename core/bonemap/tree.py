"""The bone tree the automatic bone mapping walks (``core.bonemap.detect``): parents, children, world rest heads,
depths, subtree sizes, ancestors, paths and lowest common ancestors."""

from __future__ import annotations

import numpy as np

from ..types import Skeleton


class BoneTree:
    """A skeleton's tree and world rest heads, for the bone-map detection (``detect``)."""

    def __init__(self, skeleton: Skeleton):
        self.s = skeleton
        self.parents = skeleton.parents
        self.J = skeleton.num_bones
        self.children = [[] for _ in range(self.J)]
        for j, p in enumerate(self.parents):
            if p >= 0:
                self.children[p].append(j)
        G = skeleton.object_matrix @ skeleton.rest_global
        self.pos = G[:, :3, 3]                                       # world rest heads (J, 3)
        self.depth = skeleton.depths
        self.size = np.ones(self.J, dtype=np.int64)                  # subtree sizes
        for j in range(self.J - 1, 0, -1):
            if self.parents[j] >= 0:
                self.size[self.parents[j]] += self.size[j]

    def ancestors(self, j):
        """[j, parent(j), ..., root]."""
        out = []
        while j >= 0:
            out.append(j)
            j = int(self.parents[j])
        return out

    def is_ancestor(self, a, b):
        """True when a is b or an ancestor of b."""
        return a in self.ancestors(b)

    def lca(self, *bones):
        common = None
        for b in bones:
            anc = self.ancestors(b)
            common = anc if common is None else [a for a in common if a in set(anc)]
        return common[0] if common else -1

    def path(self, a, b):
        """Bones strictly below a down to b inclusive (a must be an ancestor of b)."""
        anc = self.ancestors(b)
        return list(reversed(anc[:anc.index(a)]))

    def descendants(self, j):
        out, stack = [], [j]
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(self.children[k])
        return sorted(out)


__all__ = ["BoneTree"]
