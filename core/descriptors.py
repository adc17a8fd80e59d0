"""Pose descriptors of key vertices (method.md §1.4), batched over frames, in world space (metres, Z up).

Two layers:

- ``KeyVertexRig``: FK + LBS of one or several stacked characters' key vertices from their pose channels,
  in world space. Stacked characters concatenate their key vertices; ``rig.character`` (N,) says which
  character each one belongs to, so pair descriptors cover inter-character pairs like self pairs.
- Pure descriptor functions on key-vertex positions ``p (T, N, 3)`` and unit normals ``n (T, N, 3)``:
  dense (``dist_matrix``, ``dir_matrix``, ``pen_matrix``) for tests and small clips, and sparse
  (``pair_descriptors``) on index lists ``(t, i, j)`` for the solver; ``height`` (optionally above a
  differentiable terrain ``HeightField``) and ``sliding`` (horizontal velocity, Δt = 1 / fps).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from .errors import CoreError
from .types import Character

UP_AXIS = 2  # world Z


# ----------------------------------------------------------------------------------------------------------
# Key-vertex rig: pose channels -> key-vertex positions and normals (world space)
# ----------------------------------------------------------------------------------------------------------

def _object_affine(object_matrix, dtype, device):
    M = torch.as_tensor(np.asarray(object_matrix), dtype=dtype, device=device)
    A = M[:3, :3]
    R = A / A.norm(dim=0)
    return A, M[:3, 3], R


class _CharacterPart:
    """FK + LBS of one character restricted to its key vertices and the bones they depend on.

    Only the "needed" bones are evaluated: the bones skinning a key vertex, their ancestors and ``extra``
    bones (with their ancestors). FK runs level by level over tree depth on per-bone tensors (no scatter of
    full-skeleton buffers in the backward pass), and skinning blends the per-bone matrices with one dense
    (N, J_needed) weight matmul.
    """

    def __init__(self, character: Character, dtype, device, extra=()):
        if character.mesh is None:
            raise CoreError(f"Character '{character.name}' has no mesh: fit a body to it before solving.")
        if character.keyverts is None or len(character.keyverts) == 0:
            raise CoreError(f"Character '{character.name}' has no key vertices: transfer them first.")
        ids = character.keyverts.vertex_ids
        if ids.max() >= character.mesh.num_verts or ids.min() < 0:
            raise CoreError(f"Character '{character.name}': key-vertex ids do not fit its mesh "
                            f"({character.mesh.num_verts} vertices); transfer the key vertices again.")
        sk = character.skeleton
        m = character.mesh
        self.character = character
        wb, wv = m.weight_bones[ids], m.weight_values[ids]
        seeds = set(int(b) for b in wb[wv > 0].ravel()) | set(int(b) for b in extra)
        needed = set()
        for b in seeds:
            while b >= 0 and b not in needed:
                needed.add(b)
                b = int(sk.parents[b])
        self.needed = np.asarray(sorted(needed), dtype=np.int64)       # topological (parents[j] < j)
        pos = {int(b): k for k, b in enumerate(self.needed)}
        self.position = pos
        par = [pos.get(int(sk.parents[b]), -1) for b in self.needed]
        depth = np.zeros(len(self.needed), np.int64)
        for k, p in enumerate(par):
            depth[k] = 0 if p < 0 else depth[p] + 1
        self.levels = [(np.nonzero(depth == d)[0].tolist(), [par[k] for k in np.nonzero(depth == d)[0]])
                       for d in range(int(depth.max()) + 1)]
        rl = torch.as_tensor(sk.rest_local[self.needed], dtype=dtype, device=device)
        self.rest_rot, self.rest_trans = rl[:, :3, :3], rl[:, :3, 3]
        inv = np.linalg.inv(sk.rest_global[self.needed])
        self.inv_rot = torch.as_tensor(inv[:, :3, :3], dtype=dtype, device=device)
        self.inv_trans = torch.as_tensor(inv[:, :3, 3], dtype=dtype, device=device)
        W = np.zeros((len(ids), len(self.needed)))
        for v in range(len(ids)):
            for b, w in zip(wb[v], wv[v]):
                if w > 0:
                    W[v, pos[int(b)]] += w
        self.W = torch.as_tensor(W, dtype=dtype, device=device)
        self.needed_t = torch.as_tensor(self.needed, device=device)
        self.rest_verts = torch.as_tensor(m.rest_verts[ids], dtype=dtype, device=device)
        self.rest_normals = torch.as_tensor(m.rest_normals[ids], dtype=dtype, device=device)
        self.A, self.b, self.R = _object_affine(sk.object_matrix, dtype, device)

    def global_needed(self, rotations: torch.Tensor, locations: torch.Tensor):
        """Armature-space (rot (T, Jn, 3, 3), pos (T, Jn, 3)) of the needed bones from their basis channels."""
        local_rot = self.rest_rot @ rotations
        local_pos = (self.rest_rot @ locations[..., None])[..., 0] + self.rest_trans
        lr, lp = local_rot.unbind(-3), local_pos.unbind(-2)
        g_rot = [None] * len(lr)
        g_pos = [None] * len(lr)
        for d, (ks, ps) in enumerate(self.levels):
            if d == 0:
                for k in ks:
                    g_rot[k], g_pos[k] = lr[k], lp[k]
                continue
            PR = torch.stack([g_rot[p] for p in ps], -3)
            PP = torch.stack([g_pos[p] for p in ps], -2)
            LR = torch.stack([lr[k] for k in ks], -3)
            LP = torch.stack([lp[k] for k in ks], -2)
            GR = (PR @ LR).unbind(-3)
            GP = ((PR @ LP[..., None])[..., 0] + PP).unbind(-2)
            for k, r, p in zip(ks, GR, GP):
                g_rot[k], g_pos[k] = r, p
        return torch.stack(g_rot, -3), torch.stack(g_pos, -2)

    def keyverts_needed(self, rotations: torch.Tensor, locations: torch.Tensor):
        """Key-vertex world positions and unit normals (T, N_c, 3) from the needed bones' channels
        (T, Jn, 3, 3) and (T, Jn, 3), ordered as ``self.needed``."""
        G_rot, G_pos = self.global_needed(rotations, locations)
        S_rot = G_rot @ self.inv_rot
        S_t = (G_rot @ self.inv_trans[..., None])[..., 0] + G_pos
        S = torch.cat([S_rot.flatten(-2), S_t], -1)        # (T, Jn, 12)
        B = self.W @ S                                      # (T, N, 12) blended skinning matrices
        Rb = B[..., :9].unflatten(-1, (3, 3))
        p = (Rb * self.rest_verts[:, None, :]).sum(-1) + B[..., 9:]
        n = (Rb * self.rest_normals[:, None, :]).sum(-1)
        n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return p @ self.A.T + self.b, n @ self.R.T

    def keyverts(self, rotations: torch.Tensor, locations: torch.Tensor):
        """Key-vertex world positions and unit normals, each (T, N_c, 3), from full (T, J, ...) channels."""
        return self.keyverts_needed(rotations.index_select(-3, self.needed_t),
                                    locations.index_select(-2, self.needed_t))


class KeyVertexRig:
    """Key vertices of one or several stacked characters, driven by their pose channels.

    Args:
        characters: one Character or a sequence of them (stacked in this order).
        dtype, device: torch dtype / device of the computation.
        extra_bones: optional, per character, bones to evaluate besides those the key vertices depend on.
    Attributes:
        num_keyverts: N, total over stacked characters.
        character: (N,) int64 index of the character of each key vertex.
        heights: (C,) h_c of each character (metres).
        limbs: (N,) limb name of each key vertex.
    """

    def __init__(self, characters, dtype=torch.float32, device="cpu", extra_bones=None):
        if isinstance(characters, Character):
            characters = [characters]
        extra_bones = extra_bones or [()] * len(characters)
        self.parts = [_CharacterPart(c, dtype, device, e) for c, e in zip(characters, extra_bones)]
        self.dtype, self.device = dtype, device
        counts = [len(c.keyverts) for c in characters]
        self.character = np.repeat(np.arange(len(characters)), counts)
        self.num_keyverts = int(sum(counts))
        self.limbs = tuple(l for c in characters for l in c.keyverts.limbs)
        hs = []
        for c in characters:
            if c.height is None or not np.isfinite(c.height) or c.height <= 0:
                raise CoreError(f"Character '{c.name}' has no height h_c: measure it (core.keyverts."
                                f"character_height) before solving.")
            hs.append(float(c.height))
        self.heights = np.asarray(hs)

    def __call__(self, rotations: Sequence[torch.Tensor], locations: Sequence[torch.Tensor]):
        """Args:
            rotations: per character, (T, J_c, 3, 3) basis rotations (a single tensor for one character).
            locations: per character, (T, J_c, 3) basis locations.
        Returns:
            p (T, N, 3) world positions and n (T, N, 3) unit world normals.
        """
        if isinstance(rotations, torch.Tensor):
            rotations, locations = [rotations], [locations]
        ps, ns = zip(*(part.keyverts(r, l) for part, r, l in zip(self.parts, rotations, locations)))
        if len(ps) == 1:
            return ps[0], ns[0]
        return torch.cat(ps, dim=-2), torch.cat(ns, dim=-2)

    def key_height(self) -> torch.Tensor:
        """(N,) h_c of the character owning each key vertex."""
        return torch.as_tensor(self.heights[self.character], dtype=self.dtype, device=self.device)


# ----------------------------------------------------------------------------------------------------------
# Dense pair descriptors (T, N, N)
# ----------------------------------------------------------------------------------------------------------

def dir_matrix(p: torch.Tensor) -> torch.Tensor:
    """M_dir(i, j) = p_j − p_i.  p (..., N, 3) -> (..., N, N, 3)."""
    return p[..., None, :, :] - p[..., :, None, :]


def dist_matrix(p: torch.Tensor) -> torch.Tensor:
    """M_dist(i, j) = ||p_j − p_i||.  p (..., N, 3) -> (..., N, N)."""
    return dir_matrix(p).norm(dim=-1)


def pen_matrix(p: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """M_pen(i, j) = n_i · (p_j − p_i), signed distance of j along i's normal (asymmetric).

    p, n (..., N, 3) -> (..., N, N).
    """
    return (n[..., :, None, :] * dir_matrix(p)).sum(-1)


# ----------------------------------------------------------------------------------------------------------
# Sparse pair descriptors on index lists
# ----------------------------------------------------------------------------------------------------------

class PairDescriptors(NamedTuple):
    """Pair descriptors of E (frame, i, j) entries: dist (E,), dir (E, 3), pen (E,)."""

    dist: torch.Tensor
    dir: torch.Tensor
    pen: torch.Tensor


def pair_descriptors(p: torch.Tensor, n: torch.Tensor, t: torch.Tensor, i: torch.Tensor,
                     j: torch.Tensor, eps: float = 1e-12) -> PairDescriptors:
    """Descriptors of chosen (t, i, j) entries only.

    Args:
        p, n: (T, N, 3) positions and unit normals.
        t, i, j: (E,) int64 frame and key-vertex indices.
    Returns:
        PairDescriptors with dist (E,) (gradient-safe at 0), dir (E, 3) = p_j − p_i, pen (E,).
    """
    N = p.shape[1]
    flat_p = p.reshape(-1, 3)
    fi = t * N + i
    fj = t * N + j
    d = flat_p.index_select(0, fj) - flat_p.index_select(0, fi)
    dist = (d.square().sum(-1) + eps).sqrt()
    pen = (n.reshape(-1, 3).index_select(0, fi) * d).sum(-1)
    return PairDescriptors(dist, d, pen)


# ----------------------------------------------------------------------------------------------------------
# Height and sliding
# ----------------------------------------------------------------------------------------------------------

class HeightField:
    """A differentiable terrain ``z = f(x, y)``: bilinear interpolation of a regular grid (world metres).

    Args:
        origin: (x0, y0) of grid sample [0, 0].
        spacing: (dx, dy) between samples.
        heights: (nx, ny) terrain height at ``(x0 + a dx, y0 + b dy)``.
    Outside the grid the border value is used (clamped).
    """

    def __init__(self, origin, spacing, heights):
        self.origin = tuple(float(v) for v in origin)
        self.spacing = tuple(float(v) for v in spacing)
        self.heights = np.asarray(heights, dtype=np.float64)
        if self.heights.ndim != 2 or min(self.heights.shape) < 2:
            raise CoreError("Terrain height field must be a grid of at least 2 x 2 samples.")
        if min(self.spacing) <= 0:
            raise CoreError("Terrain height field spacing must be positive.")

    @classmethod
    def from_function(cls, fn, x_range, y_range, resolution=64):
        """Sample ``fn(x, y) -> z`` (numpy, vectorised) on a resolution × resolution grid."""
        xs = np.linspace(*x_range, resolution)
        ys = np.linspace(*y_range, resolution)
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        return cls((xs[0], ys[0]), (xs[1] - xs[0], ys[1] - ys[0]), fn(X, Y))

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Terrain height under (x, y), same shape as x; differentiable in x and y."""
        H = torch.as_tensor(self.heights, dtype=x.dtype, device=x.device)
        nx, ny = H.shape
        u = ((x - self.origin[0]) / self.spacing[0]).clamp(0, nx - 1)
        v = ((y - self.origin[1]) / self.spacing[1]).clamp(0, ny - 1)
        u0 = u.detach().floor().clamp(max=nx - 2).long()
        v0 = v.detach().floor().clamp(max=ny - 2).long()
        fu, fv = u - u0, v - v0
        h00, h10 = H[u0, v0], H[u0 + 1, v0]
        h01, h11 = H[u0, v0 + 1], H[u0 + 1, v0 + 1]
        return (h00 * (1 - fu) * (1 - fv) + h10 * fu * (1 - fv) + h01 * (1 - fu) * fv + h11 * fu * fv)


def height(p: torch.Tensor, ground=0.0) -> torch.Tensor:
    """M_height(i) = up · p_i − ground.  p (..., N, 3) -> (..., N).

    ground: a constant level (float), or a HeightField / callable ``f(x, y)`` (method.md §1.7b).
    """
    z = p[..., UP_AXIS]
    if callable(ground):
        return z - ground(p[..., 0], p[..., 1])
    return z - ground


def sliding(p: torch.Tensor, fps: float, pad: bool = False) -> torch.Tensor:
    """M_sliding: horizontal velocity (H(p_{t+1}) − H(p_t)) · fps.

    p (T, N, 3) -> (T − 1, N, 2), or (T, N, 2) with ``pad`` (the last velocity repeated).
    """
    v = (p[1:, :, :2] - p[:-1, :, :2]) * float(fps)
    if pad:
        v = torch.cat([v, v[-1:]], dim=0) if len(v) else torch.zeros_like(p[..., :2])
    return v
