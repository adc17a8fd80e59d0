"""Fast forward kinematics + linear blend skinning of chosen mesh vertices (the solver's hot path).

``kinematics.ForwardKinematics`` and ``skinning.skin_vertices`` are the reference implementation; this module
evaluates only what the chosen vertices need and is tested against them (tests/core/test_rig.py):

- ``VertexChain``: one character's chosen vertices (key vertices, sole points) from its pose channels, evaluating
  only the bones that skin them and their ancestors, level by level over tree depth, with one dense
  (V, J_needed) weight matmul for skinning.
- ``VariableChain``: the same when only some bones' rotations and the hips location vary (the solver's
  variables): everything constant is computed once, per step only the variable bones are evaluated.
- ``KeyVertexRig``: the key vertices of one or several stacked characters (ReConForM §6.1 stacks characters, so
  pair descriptors cover inter-character pairs like self pairs).

Positions and normals come out in world space (metres, Z up): armature space through the armature's object matrix.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .affine import inv
from ..errors import CoreError
from .skinning import bind_matrices
from ..types import Character


def object_affine(object_matrix, dtype, device):
    """(A (3, 3), b (3,), R (3, 3)): world = A @ armature + b for points, R (columns normalised) for normals."""
    M = torch.as_tensor(np.asarray(object_matrix), dtype=dtype, device=device)
    A = M[:3, :3]
    R = A / A.norm(dim=0)
    return A, M[:3, 3], R


class VertexChain:
    """FK + LBS of one character restricted to chosen mesh vertices and the bones they depend on.

    Only the "needed" bones are evaluated: the bones skinning a chosen vertex, their ancestors and ``extra``
    bones (with their ancestors). FK runs level by level over tree depth on per-bone tensors (no scatter of
    full-skeleton buffers in the backward pass), and skinning blends the per-bone matrices with one dense
    (V, J_needed) weight matmul.

    Args:
        character: Character with skeleton and mesh.
        vertex_ids: (V,) int mesh vertex indices.
        dtype, device: torch dtype / device of the computation.
        extra: bone indices to evaluate besides those the vertices depend on (e.g. the hips).
        points: optional (bones (P,) skeleton indices, (P, 3) positions in each bone's frame): points carried
            rigidly by one bone each (the joint solve's body capsules, ``solver.barrier``), evaluated from the
            bones' transforms, not skinned (``points``; ``VariableChain.last_points``).
    Attributes:
        needed: (Jn,) int64 skeleton indices of the evaluated bones, topologically sorted.
        position: {skeleton index: position in ``needed``}.
        W: (V, Jn) dense skin weights.
    """

    def __init__(self, character: Character, vertex_ids, dtype, device, extra=(), points=None):
        if character.mesh is None:
            raise CoreError(f"Character '{character.name}' has no mesh: fit a body to it before solving.")
        ids = np.asarray(vertex_ids, dtype=np.int64)
        if len(ids) and (ids.max() >= character.mesh.num_verts or ids.min() < 0):
            raise CoreError(f"Character '{character.name}': vertex ids do not fit its mesh "
                            f"({character.mesh.num_verts} vertices); transfer the key vertices again.")
        sk, m = character.skeleton, character.mesh
        self.character = character
        self.vertex_ids = ids
        wb, wv = m.weight_bones[ids], m.weight_values[ids]
        point_bones = [] if points is None else [int(b) for b in points[0]]
        seeds = set(int(b) for b in wb[wv > 0].ravel()) | set(int(b) for b in extra) | set(point_bones)
        needed = set()
        for b in seeds:
            while b >= 0 and b not in needed:
                needed.add(b)
                b = int(sk.parents[b])
        self.needed = np.asarray(sorted(needed), dtype=np.int64)
        pos = {int(b): k for k, b in enumerate(self.needed)}
        self.position = pos
        self.parent = [pos.get(int(sk.parents[b]), -1) for b in self.needed]
        depth = np.zeros(len(self.needed), np.int64)
        for k, p in enumerate(self.parent):
            depth[k] = 0 if p < 0 else depth[p] + 1
        self.levels = [(np.nonzero(depth == d)[0].tolist(), [self.parent[k] for k in np.nonzero(depth == d)[0]])
                       for d in range(int(depth.max()) + 1)] if len(self.needed) else []
        rl = torch.as_tensor(sk.rest_local[self.needed], dtype=dtype, device=device)
        self.rest_rot, self.rest_trans = rl[:, :3, :3], rl[:, :3, 3]
        bind_inv = inv(bind_matrices(sk, m)[self.needed])
        self.inv_rot = torch.as_tensor(bind_inv[:, :3, :3], dtype=dtype, device=device)
        self.inv_trans = torch.as_tensor(bind_inv[:, :3, 3], dtype=dtype, device=device)
        W = np.zeros((len(ids), len(self.needed)))
        for v in range(len(ids)):
            for b, w in zip(wb[v], wv[v]):
                if w > 0:
                    W[v, pos[int(b)]] += w
        self.W = torch.as_tensor(W, dtype=dtype, device=device)
        self.needed_t = torch.as_tensor(self.needed, device=device)
        self.rest_verts = torch.as_tensor(m.rest_verts[ids], dtype=dtype, device=device)
        self.rest_normals = torch.as_tensor(m.rest_normals[ids], dtype=dtype, device=device)
        self.A, self.b, self.R = object_affine(sk.object_matrix, dtype, device)
        self.point_pos = [pos[b] for b in point_bones]                    #: (P,) positions in ``needed``
        self.point_local = torch.as_tensor(np.zeros((0, 3)) if points is None else points[1], dtype=dtype,
                                           device=device).reshape(-1, 3)

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

    def vertices_needed(self, rotations: torch.Tensor, locations: torch.Tensor):
        """World positions and unit normals (T, V, 3) from the needed bones' channels (T, Jn, 3, 3) and
        (T, Jn, 3), ordered as ``self.needed``."""
        G_rot, G_pos = self.global_needed(rotations, locations)
        S_rot = G_rot @ self.inv_rot
        S_t = (G_rot @ self.inv_trans[..., None])[..., 0] + G_pos
        S = torch.cat([S_rot.flatten(-2), S_t], -1)        # (T, Jn, 12)
        B = self.W @ S                                      # (T, V, 12) blended skinning matrices
        Rb = B[..., :9].unflatten(-1, (3, 3))
        p = (Rb * self.rest_verts[:, None, :]).sum(-1) + B[..., 9:]
        n = (Rb * self.rest_normals[:, None, :]).sum(-1)
        n = n @ self.R.T     # R is orthogonal unless the object is scaled non-uniformly: then normalise again
        return p @ self.A.T + self.b, n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def vertices(self, rotations: torch.Tensor, locations: torch.Tensor):
        """World positions and unit normals (T, V, 3) from full (T, J, 3, 3) / (T, J, 3) basis channels."""
        return self.vertices_needed(rotations.index_select(-3, self.needed_t),
                                    locations.index_select(-2, self.needed_t))

    def points(self, rotations: torch.Tensor, locations: torch.Tensor) -> torch.Tensor:
        """World positions (T, P, 3) of the carried points from full (T, J, 3, 3) / (T, J, 3) basis channels."""
        G_rot, G_pos = self.global_needed(rotations.index_select(-3, self.needed_t),
                                          locations.index_select(-2, self.needed_t))
        k = self.point_pos
        p = (G_rot[:, k] @ self.point_local[..., None])[..., 0] + G_pos[:, k]
        return p @ self.A.T + self.b


class VariableChain:
    """``VertexChain`` where only some bones' rotations and the hips' basis location vary (the solver's
    variables).

    Everything that does not depend on the variables is computed once: global transforms of bones with no
    variable ancestor, local transforms of the other bones, and the skinning contribution of constant bones.
    Per call only the "variable" bones (optimised, or below an optimised bone, or the hips) are evaluated, one
    tree level at a time on bone-major (J, T, 3, 4) [R | t] tensors: the local transforms are put in level order
    once, as 4 × 4 matrices, and split per level; each level gathers its parents' global transforms with one
    ``index_select`` per group (bones of a level are grouped by where their parent's transform comes from) and
    takes one (n, T, 3, 4) @ (n, T, 4, 4) product, so the graph has a handful of operations per level, not per
    bone (3 × 3 rotations and positions apart took twice as many).

    Transforms are world-space from the start (the armature's object matrix is folded into the tree roots), and
    skinning works on 3×4 [R | t] matrices: one (Jv, 3T, 4) @ (Jv, 4, 4) product for the skinning matrices, one
    (V, Jv) @ (Jv, 12T) weight product, one (V, 2, 4) @ (V, 4, 3T) product for positions and normals together.
    Small products over large batches: far fewer operations (and autograd nodes) than per-element forms.

    Args:
        chain: the VertexChain of the character's chosen vertices (its ``extra`` bones include the hips).
        R_n, L_n: (T, Jn, 3, 3) / (T, Jn, 3) initial basis channels of the needed bones.
        opt_pos: positions (in ``chain.needed``) of the optimised bones, in the order of the variables.
        root_pos: position (in ``chain.needed``) of the hips, whose basis location varies.
    """

    def __init__(self, chain: VertexChain, R_n, L_n, opt_pos, root_pos: int):
        Jn = len(chain.needed)
        par = chain.parent
        opt_of = {int(k): a for a, k in enumerate(opt_pos)}
        var = [False] * Jn
        for k in range(Jn):          # needed bones are topologically sorted
            var[k] = k in opt_of or k == root_pos or (par[k] >= 0 and var[par[k]])
        dev, dt = R_n.device, R_n.dtype
        A, b = chain.A, chain.b
        self.A, self.b = A, b
        V = chain.W.shape[0]
        bind = torch.zeros((Jn, 4, 4), dtype=dt, device=dev)                          # (Jn, 4, 4) bind⁻¹
        bind[:, :3, :3], bind[:, :3, 3], bind[:, 3, 3] = chain.inv_rot, chain.inv_trans, 1.0
        with torch.no_grad():
            G_rot0, G_pos0 = chain.global_needed(R_n, L_n)                         # armature space
            G_rot0 = A @ G_rot0                                                    # world space
            G_pos0 = G_pos0 @ A.T + b
            loc_rot0 = (chain.rest_rot @ R_n).transpose(0, 1)                # (Jn, T, 3, 3) bone-major
            loc_pos0 = ((chain.rest_rot @ L_n[..., None])[..., 0] + chain.rest_trans).transpose(0, 1)
            self.Gc = torch.cat([G_rot0, G_pos0[..., None]], -1).transpose(0, 1).contiguous()  # (Jn, T, 3, 4)
            const = [k for k in range(Jn) if not var[k]]
            if const:
                S = _skinning_matrices(self.Gc[const], bind[const])                             # (Jc, 12T)
                self.B_const = chain.W[:, const] @ S                                           # (V, 12T)
            else:
                self.B_const = None
        # levels of the variable bones (depth among variable bones); within a level, bones are grouped by the
        # source of their parent's transform: none (a tree root), a constant bone, or a variable bone of an
        # earlier level; slots follow that order, and so do the skinning columns
        vk = [k for k in range(Jn) if var[k]]
        depth = {}
        for k in vk:
            depth[k] = depth[par[k]] + 1 if par[k] >= 0 and var[par[k]] else 0
        slot = {}
        fixed = [k for k in vk if k not in opt_of]                           # variable bones, constant local
        fixed_slot = {k: i for i, k in enumerate(fixed)}
        self.levels = []
        order, lr_order, lp_order = [], [], []
        for d in range(max(depth.values()) + 1):
            def source(k):
                p = par[k]
                return -2 if p < 0 else (-1 if not var[p] else slot[p][0])
            ks = sorted((k for k in vk if depth[k] == d), key=source)       # stable: tree order inside a group
            for i, k in enumerate(ks):
                slot[k] = (d, i)
            groups = []
            for src in sorted({source(k) for k in ks}):
                members = [k for k in ks if source(k) == src]
                idx = [par[k] if src == -1 else slot[par[k]][1] for k in members] if src != -2 else []
                groups.append((src, len(members), torch.as_tensor(idx, dtype=torch.long, device=dev)))
            lr_order += [opt_of[k] if k in opt_of else len(opt_pos) + fixed_slot[k] for k in ks]
            lp_order += [0 if k == root_pos else 1 + vk.index(k) for k in ks]
            self.levels.append((len(ks), groups))
            order.extend(ks)
        self.lr_order = torch.as_tensor(lr_order, device=dev)
        self.lp_order = torch.as_tensor(lp_order, device=dev)
        self.level_sizes = [n for n, _ in self.levels]
        self.vk = order                                                      # variable bones in slot order
        self.Lc_rot = loc_rot0[fixed].contiguous() if fixed else None        # (Jf, T, 3, 3)
        self.Lc_pos = loc_pos0[vk].contiguous()                              # (Jv, T, 3)
        self.root_rest_rot = chain.rest_rot[root_pos]
        self.root_rest_trans = chain.rest_trans[root_pos]
        self.W_var = chain.W[:, order].contiguous()                          # (V, Jv)
        self.bind = bind[order].contiguous()                                 # (Jv, 4, 4)
        # each vertex's [rest position, 1] and [rest normal, 0] as the two rows of a (2, 4) matrix
        self.rest = torch.cat([torch.stack([chain.rest_verts, chain.rest_normals], 1),
                               torch.as_tensor([1.0, 0.0], dtype=dt, device=dev).expand(V, 2)[..., None]], -1)
        # the object's translation b enters every skinning matrix: a vertex whose weights do not sum to 1
        # gets wsum · b; this puts it back to b (None when every row sums to 1 within round-off)
        wsum = chain.W.sum(-1)
        self.b_fix = None if bool(((wsum - 1.0).abs() < 1e-9).all()) else ((1.0 - wsum)[:, None, None] * b)
        # normals: the reference is normalize(R n) with R the object matrix's columns normalised; transformed
        # by A they are A n, so M = R A⁻¹ maps them back (a multiple of I when A is a rotation and a uniform
        # scale: then normalising is enough)
        A64 = np.asarray(chain.character.skeleton.object_matrix, dtype=np.float64)[:3, :3]
        M = (A64 / np.linalg.norm(A64, axis=0)) @ inv(A64)
        s = np.trace(M) / 3.0
        self.normal_map = None if np.allclose(M, s * np.eye(3), rtol=0.0, atol=1e-9 * abs(s)) \
            else torch.as_tensor(M, dtype=dt, device=dev)
        # carried points: those on a variable bone are read from its transform every call, the others once
        pp = chain.point_pos
        self.pt_var = [i for i, k in enumerate(pp) if var[k]]
        pt_const = [i for i, k in enumerate(pp) if not var[k]]
        self.pt_slot = torch.as_tensor([order.index(pp[i]) for i in self.pt_var], dtype=torch.long, device=dev)
        #: (Pv, 1, 4, 1) homogeneous local positions of the carried points on variable bones
        self.pt_local = torch.cat([chain.point_local[self.pt_var],
                                   torch.ones((len(self.pt_var), 1), dtype=dt, device=dev)], -1)[:, None, :, None]
        #: [A | b] (3, 4): the armature object's transform applied to the tree roots' local transforms
        self.A34 = torch.cat([A, b[:, None]], -1)
        self.bottom = torch.as_tensor([0.0, 0.0, 0.0, 1.0], dtype=dt, device=dev)       # a 4 × 4's last row
        with torch.no_grad():                                                # G_rot0 / G_pos0: world space
            k = [pp[i] for i in pt_const]
            self.pt_const = (G_rot0[:, k] @ chain.point_local[pt_const][..., None])[..., 0] + G_pos0[:, k]
        self.pt_order = torch.as_tensor(np.argsort(self.pt_var + pt_const), dtype=torch.long, device=dev)
        self.last_points = None     #: (T, P, 3) world positions of the carried points at the last call

    def __call__(self, local_opt: torch.Tensor, root_loc: torch.Tensor):
        """World positions and unit normals of the chosen vertices, each (T, V, 3).

        local_opt: (Jo, T, 3, 3) local rotations (rest · basis) of the optimised bones; root_loc (T, 3) hips
        basis location.
        """
        root_lp = root_loc @ self.root_rest_rot.T + self.root_rest_trans    # (T, 3)
        LR_all = local_opt if self.Lc_rot is None else torch.cat([local_opt, self.Lc_rot])
        LP_all = torch.cat([root_lp[None], self.Lc_pos])
        LR, LP = LR_all.index_select(0, self.lr_order), LP_all.index_select(0, self.lp_order)
        J, T = LR.shape[:2]
        # local transforms as 4 × 4 [R | t; 0 0 0 1], slot order: one product per tree level
        L = torch.cat([torch.cat([LR, LP[..., None]], -1), self.bottom.expand(J, T, 1, 4)], -2)
        Ls = L.split(self.level_sizes)
        Gs = []                                                              # per level (n, T, 3, 4) [R | t]
        for Ll, (_, groups) in zip(Ls, self.levels):
            n_roots = groups[0][1] if groups[0][0] == -2 else 0
            parents = [self.Gc.index_select(0, idx) if src == -1 else Gs[src].index_select(0, idx)
                       for src, _, idx in groups if src != -2]
            out = [self.A34 @ Ll[:n_roots]] if n_roots else []               # tree roots: world = object · local
            if parents:
                out.append((parents[0] if len(parents) == 1 else torch.cat(parents)) @ Ll[n_roots:])
            Gs.append(out[0] if len(out) == 1 else torch.cat(out))
        G = Gs[0] if len(Gs) == 1 else torch.cat(Gs)                         # (Jv, T, 3, 4), slot order
        if len(self.pt_order):                                               # world space already
            pv = (G.index_select(0, self.pt_slot) @ self.pt_local)[..., 0]                        # (Pv, T, 3)
            pts = torch.cat([pv.transpose(0, 1), self.pt_const], 1)                                # (T, P, 3)
            self.last_points = pts.index_select(1, self.pt_order)
        B = self.W_var @ _skinning_matrices(G, self.bind)                    # (V, 12T) blended [R | t]
        if self.B_const is not None:
            B = B + self.B_const
        V = B.shape[0]
        Y = self.rest @ B.view(V, 3 * T, 4).transpose(1, 2)                  # (V, 2, 3T): positions, normals
        p, n = Y[:, 0].view(V, T, 3), Y[:, 1].view(V, T, 3)
        if self.b_fix is not None:
            p = p + self.b_fix
        if self.normal_map is not None:
            n = n @ self.normal_map.T
        n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return p.transpose(0, 1).contiguous(), n.transpose(0, 1).contiguous()


def _skinning_matrices(G: torch.Tensor, bind: torch.Tensor) -> torch.Tensor:
    """(J, 12T) skinning matrices G · bind⁻¹ as row-major 3×4 [R | t] per frame, from global transforms G
    (J, T, 3, 4) [R | t] and inverse bind matrices ``bind`` (J, 4, 4)."""
    J, T = G.shape[:2]
    return (G.reshape(J, 3 * T, 4) @ bind).view(J, 12 * T)                   # [R B_R | R B_t + t], frame-major


class KeyVertexRig:
    """Key vertices of one or several stacked characters, driven by their pose channels.

    Args:
        characters: one Character or a sequence of them (stacked in this order).
        dtype, device: torch dtype / device of the computation.
        extra_bones: optional, per character, bones to evaluate besides those the key vertices depend on.
    Attributes:
        chains: one VertexChain per character (its key vertices).
        num_keyverts: N, total over stacked characters.
        character: (N,) int64 index of the character of each key vertex.
        heights: (C,) h_c of each character (metres).
        limbs: (N,) limb name of each key vertex.
    """

    def __init__(self, characters, dtype=torch.float32, device="cpu", extra_bones=None):
        if isinstance(characters, Character):
            characters = [characters]
        extra_bones = extra_bones or [()] * len(characters)
        for c in characters:
            if c.keyverts is None or len(c.keyverts) == 0:
                raise CoreError(f"Character '{c.name}' has no key vertices: transfer them first.")
        self.chains = [VertexChain(c, c.keyverts.vertex_ids, dtype, device, e)
                       for c, e in zip(characters, extra_bones)]
        self.dtype, self.device = dtype, device
        counts = [len(c.keyverts) for c in characters]
        self.character = np.repeat(np.arange(len(characters)), counts)
        self.num_keyverts = int(sum(counts))
        self.limbs = tuple(lb for c in characters for lb in c.keyverts.limbs)
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
        ps, ns = zip(*(ch.vertices(r, l) for ch, r, l in zip(self.chains, rotations, locations)))
        if len(ps) == 1:
            return ps[0], ns[0]
        return torch.cat(ps, dim=-2), torch.cat(ns, dim=-2)

    def key_height(self) -> torch.Tensor:
        """(N,) h_c of the character owning each key vertex."""
        return torch.as_tensor(self.heights[self.character], dtype=self.dtype, device=self.device)
