"""Small synthetic skeletons and meshes for core tests (no bpy)."""

import numpy as np

from core.types import Skeleton, SkinnedMesh


def translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def chain_skeleton(n=4, length=0.5, name="chain"):
    """A straight chain of ``n`` bones along +Z (each bone's Y axis points up: rest rotation X +90 deg)."""
    rot = np.eye(4)
    rot[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]  # bone Y -> world +Z
    rest = [rot @ np.eye(4)]
    for _ in range(1, n):
        rest.append(translation(0, length, 0))  # child head at parent's tail, along parent Y
    return Skeleton(name, [f"b{i}" for i in range(n)], [-1] + list(range(n - 1)), np.stack(rest))


def random_tree_skeleton(n=12, seed=0):
    rng = np.random.default_rng(seed)
    parents = [-1] + [int(rng.integers(0, j)) for j in range(1, n)]
    rest = []
    for _ in range(n):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        from core.rig.rotations import quat_to_matrix
        m = np.eye(4)
        m[:3, :3] = quat_to_matrix(q)
        m[:3, 3] = rng.normal(size=3) * 0.3
        rest.append(m)
    return Skeleton("tree", [f"j{i}" for i in range(n)], parents, np.stack(rest))


def box_mesh(skeleton, verts_per_bone=6, seed=0):
    """Points scattered around each bone head, skinned to that bone and its parent."""
    rng = np.random.default_rng(seed)
    G = skeleton.rest_global
    verts, wb, wv = [], [], []
    for j in range(skeleton.num_bones):
        for _ in range(verts_per_bone):
            verts.append(G[j, :3, 3] + rng.normal(size=3) * 0.05)
            p = max(int(skeleton.parents[j]), 0)
            a = rng.uniform(0.3, 1.0)
            wb.append([j, p])
            wv.append([a, 1 - a] if p != j else [1.0, 0.0])
    verts = np.array(verts)
    normals = rng.normal(size=verts.shape)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    V = len(verts)
    faces = np.arange(V - V % 3)
    return SkinnedMesh("box", verts, normals, faces, np.arange(0, len(faces) + 1, 3),
                       np.array(wb, dtype=np.int64), np.array(wv))
