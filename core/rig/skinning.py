"""Linear blend skinning of chosen vertices (and their normals), batched over frames."""

from __future__ import annotations

import numpy as np
import torch

from .affine import inv
from .kinematics import Pose
from ..types import Skeleton, SkinnedMesh


def bind_matrices(skeleton: Skeleton, mesh: SkinnedMesh = None) -> np.ndarray:
    """(J, 4, 4) armature-space bone matrices of the pose ``mesh``'s rest vertices are bound in: its
    ``bind_global`` (a fitted body's T-pose), else the skeleton's rest pose."""
    if mesh is not None and mesh.bind_global is not None:
        return mesh.bind_global
    return skeleton.rest_global


class SkinningMatrices:
    """Per-bone skinning transforms ``S_j = G_j @ B_j^-1`` for a skeleton, B the bind matrices
    (``bind_matrices``: the rest pose, or the pose ``mesh`` is bound in).

    Precompute the inverse bind matrices once; call with a Pose.
    """

    def __init__(self, skeleton: Skeleton, dtype=torch.float32, device="cpu", mesh: SkinnedMesh = None):
        bind_inv = inv(bind_matrices(skeleton, mesh))
        self.inv_rot = torch.as_tensor(bind_inv[:, :3, :3], dtype=dtype, device=device)
        self.inv_trans = torch.as_tensor(bind_inv[:, :3, 3], dtype=dtype, device=device)

    def __call__(self, pose: Pose):
        """Returns (rot (..., J, 3, 3), trans (..., J, 3)) with ``S_j x = rot_j x + trans_j``."""
        rot = pose.rotations @ self.inv_rot
        trans = (pose.rotations @ self.inv_trans[..., None])[..., 0] + pose.positions
        return rot, trans


def skin_vertices(skin_rot, skin_trans, rest_verts, weight_bones, weight_values, rest_normals=None):
    """LBS of a (small) set of vertices with sparse weights.

    Args:
        skin_rot: (..., J, 3, 3), skin_trans: (..., J, 3) from SkinningMatrices.
        rest_verts: (V, 3) rest positions (armature space).
        weight_bones: (V, K) int64 bone indices; weight_values: (V, K) weights, rows sum to 1.
        rest_normals: optional (V, 3) unit rest normals.
    Returns:
        positions (..., V, 3), and normals (..., V, 3) (unit, or None when rest_normals is None).
    """
    wb = torch.as_tensor(weight_bones, device=skin_rot.device)
    wv = torch.as_tensor(weight_values, dtype=skin_rot.dtype, device=skin_rot.device)
    V, K = wb.shape
    J = skin_rot.shape[-3]
    # the blended transforms as one product with the dense (V, J) weights: no (..., V, K, 3, 3) gather
    W = torch.zeros((V, J), dtype=skin_rot.dtype, device=skin_rot.device)
    W.index_put_((torch.arange(V, device=wb.device).repeat_interleave(K), wb.reshape(-1)), wv.reshape(-1),
                 accumulate=True)
    S = torch.cat([skin_rot.reshape(skin_rot.shape[:-2] + (9,)), skin_trans], -1)     # (..., J, 12)
    blend = W @ S                                                                        # (..., V, 12)
    Rb = blend[..., :9].reshape(blend.shape[:-1] + (3, 3))                               # (..., V, 3, 3)
    tb = blend[..., 9:]                                                                  # (..., V, 3)
    v = torch.as_tensor(rest_verts, dtype=skin_rot.dtype, device=skin_rot.device)
    pos = (Rb @ v[..., None])[..., 0] + tb
    if rest_normals is None:
        return pos, None
    n = torch.as_tensor(rest_normals, dtype=skin_rot.dtype, device=skin_rot.device)
    nrm = (Rb @ n[..., None])[..., 0]
    nrm = nrm / nrm.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return pos, nrm


def skin_mesh(skeleton: Skeleton, mesh: SkinnedMesh, pose: Pose, vertex_ids=None):
    """Deform (all or chosen) vertices of ``mesh`` by ``pose`` (armature space).

    Args:
        vertex_ids: optional (K,) int vertex indices; all vertices when None.
    Returns:
        positions (..., K, 3) and unit normals (..., K, 3), armature space.
    """
    dtype, device = pose.positions.dtype, pose.positions.device
    sm = SkinningMatrices(skeleton, dtype, device, mesh)
    rot, trans = sm(pose)
    ids = np.arange(mesh.num_verts) if vertex_ids is None else np.asarray(vertex_ids, dtype=np.int64)
    return skin_vertices(rot, trans, mesh.rest_verts[ids], mesh.weight_bones[ids], mesh.weight_values[ids],
                         mesh.rest_normals[ids])


def rest_pose_vertices(skeleton: Skeleton, mesh: SkinnedMesh) -> np.ndarray:
    """(V, 3) float64 armature-space vertices of ``mesh`` in the skeleton's rest pose: its ``rest_verts`` when it
    is bound there, else skinned from the pose it is bound in (a fitted body's T-pose, ``bind_matrices``)."""
    if mesh.bind_global is None:
        return mesh.rest_verts
    G = torch.as_tensor(skeleton.rest_global)
    pos, _ = skin_mesh(skeleton, mesh, Pose(G[:, :3, :3], G[:, :3, 3]))
    return pos.numpy()
