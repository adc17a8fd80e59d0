"""Meshing of an implicit surface (pure numpy): naive surface nets on a rectilinear grid and area-weighted
vertex normals of a polygon mesh. Part of the body generator (``core.body``, ReConForM §3.1 template).
"""

from __future__ import annotations

import numpy as np


def _surface_nets(F, xs, ys, zs):
    """Naive surface nets on a rectilinear grid. F: (nx,ny,nz) field (<0 inside).

    Returns verts (V,3) (average of edge crossings per active cell) and quads (Q,4) outward-wound.
    """
    nx, ny, nz = F.shape
    inside = F < 0
    S = np.zeros((nx - 1, ny - 1, nz - 1, 3))
    N = np.zeros((nx - 1, ny - 1, nz - 1))
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    coords = np.stack([X, Y, Z], -1)
    crossings = []
    for a in range(3):
        sl0 = [slice(None)] * 3
        sl1 = [slice(None)] * 3
        sl0[a], sl1[a] = slice(0, -1), slice(1, None)
        f0, f1 = F[tuple(sl0)], F[tuple(sl1)]
        ch = inside[tuple(sl0)] != inside[tuple(sl1)]
        t = np.where(ch, f0 / np.where(ch, f0 - f1, 1.0), 0.0)
        p = coords[tuple(sl0)] + t[..., None] * (coords[tuple(sl1)] - coords[tuple(sl0)])
        p = p * ch[..., None]
        c = ch.astype(float)
        # an edge along axis a at (.., j, k) touches the 4 cells (.., j-1..j, k-1..k) of the other two axes
        b, cc = [ax for ax in range(3) if ax != a]
        for ob in (0, 1):
            for oc in (0, 1):
                sl = [slice(None)] * 3
                sl[b] = slice(ob, ob + (F.shape[b] - 1))
                sl[cc] = slice(oc, oc + (F.shape[cc] - 1))
                S += p[tuple(sl)]
                N += c[tuple(sl)]
        crossings.append((a, ch, f0 < 0))
    active = N > 0
    cell_id = -np.ones(active.shape, dtype=np.int64)
    cell_id[active] = np.arange(active.sum())
    verts = S[active] / N[active][:, None]
    quads = []
    for a, ch, lower_inside in crossings:
        b, c = [(1, 2), (2, 0), (0, 1)][a]
        # interior edges only (all 4 cells exist)
        idx = np.argwhere(ch)
        ok = (idx[:, b] >= 1) & (idx[:, b] <= F.shape[b] - 2) & (idx[:, c] >= 1) & (idx[:, c] <= F.shape[c] - 2)
        idx = idx[ok]
        if a == 0:
            pass
        cells = []
        for db, dc in ((-1, -1), (0, -1), (0, 0), (-1, 0)):
            q = idx.copy()
            q[:, b] += db
            q[:, c] += dc
            q[:, a] = np.minimum(q[:, a], F.shape[a] - 2)
            cells.append(cell_id[q[:, 0], q[:, 1], q[:, 2]])
        quad = np.stack(cells, 1)
        li = lower_inside[idx[:, 0], idx[:, 1], idx[:, 2]]
        quad[~li] = quad[~li][:, ::-1]
        quads.append(quad)
    quads = np.concatenate(quads, 0)
    # drop degenerate quads (can only happen at grid borders)
    quads = quads[(quads >= 0).all(1)]
    return verts, quads


def vertex_normals(verts, face_indices, face_offsets):
    """(V,3) unit area-weighted vertex normals of a polygon mesh (fan triangulation)."""
    sizes = np.diff(face_offsets)
    nrm = np.zeros_like(verts)
    for n in np.unique(sizes):
        starts = face_offsets[:-1][sizes == n]
        poly = np.stack([face_indices[starts + k] for k in range(n)], 1)
        fn = np.zeros((len(poly), 3))
        for k in range(1, n - 1):
            fn += np.cross(verts[poly[:, k]] - verts[poly[:, 0]], verts[poly[:, k + 1]] - verts[poly[:, 0]])
        for k in range(n):
            np.add.at(nrm, poly[:, k], fn)
    ln = np.linalg.norm(nrm, axis=1, keepdims=True)
    return nrm / np.maximum(ln, 1e-20)


__all__ = ["vertex_normals"]
