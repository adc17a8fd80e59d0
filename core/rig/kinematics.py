"""Forward kinematics batched over frames and over bones of equal tree depth.

Blender's pose evaluation, exactly (checked against Blender's own pose bones in tests/addon/test_bridge_read.py):
``pose.bones[j].matrix = pose.bones[p].matrix @ rest_local[j] @ matrix_basis[j]``, in armature space.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .rotations import quat_to_matrix
from ..types import Skeleton


class Pose(NamedTuple):
    """Global bone transforms.

    rotations: (..., J, 3, 3) bone rotations (columns are the bone's X, Y, Z axes; Y runs head to tail).
    positions: (..., J, 3) bone heads.
    """

    rotations: torch.Tensor
    positions: torch.Tensor


class ForwardKinematics:
    """Reusable FK for one skeleton: precomputes the depth levels and rest transforms once.

    Args:
        skeleton: the Skeleton.
        dtype, device: of the tensors it will be called with.
    """

    def __init__(self, skeleton: Skeleton, dtype=torch.float32, device="cpu"):
        self.skeleton = skeleton
        rl = torch.as_tensor(skeleton.rest_local, dtype=dtype, device=device)
        self.rest_rot = rl[:, :3, :3]
        self.rest_trans = rl[:, :3, 3]
        depths = skeleton.depths
        parents = skeleton.parents
        self.levels = []  # (bone indices, parent indices) per depth
        order = []
        for d in range(int(depths.max()) + 1):
            idx = np.nonzero(depths == d)[0]
            self.levels.append((torch.as_tensor(idx, device=device), torch.as_tensor(parents[idx], device=device)))
            order.extend(idx.tolist())
        # position of bone j in the concatenation of levels
        self.inverse_order = torch.as_tensor(np.argsort(np.asarray(order)), device=device)
        # index of each level's parents inside the concatenation built so far
        pos_in_cat = np.empty(len(order), dtype=np.int64)
        pos_in_cat[np.asarray(order)] = np.arange(len(order))
        self.parent_slots = [torch.as_tensor(pos_in_cat[parents[idx.cpu().numpy()]], device=device)
                             if d > 0 else None for d, (idx, _) in enumerate(self.levels)]

    def __call__(self, rotations: torch.Tensor, locations: torch.Tensor) -> Pose:
        """Args:
            rotations: (..., J, 3, 3) local basis rotations (``matrix_basis`` rotation part).
            locations: (..., J, 3) local basis locations (``matrix_basis`` translation part).
        Returns:
            Pose in armature space.
        """
        local_rot = self.rest_rot @ rotations  # (..., J, 3, 3)
        local_pos = (self.rest_rot @ locations[..., None])[..., 0] + self.rest_trans
        rots, poss = [], []
        for d, (idx, _) in enumerate(self.levels):
            lr = local_rot.index_select(-3, idx)
            lp = local_pos.index_select(-2, idx)
            if d == 0:
                gr, gp = lr, lp
            else:
                cat_r = torch.cat(rots, dim=-3)
                cat_p = torch.cat(poss, dim=-2)
                slots = self.parent_slots[d]
                pr = cat_r.index_select(-3, slots)
                pp = cat_p.index_select(-2, slots)
                gr = pr @ lr
                gp = (pr @ lp[..., None])[..., 0] + pp
            rots.append(gr)
            poss.append(gp)
        g_rot = torch.cat(rots, dim=-3).index_select(-3, self.inverse_order)
        g_pos = torch.cat(poss, dim=-2).index_select(-2, self.inverse_order)
        return Pose(g_rot, g_pos)


def forward_kinematics(skeleton: Skeleton, rotations, locations) -> Pose:
    """One-shot FK from quaternions.

    Args:
        rotations: (..., J, 4) WXYZ local basis rotations (tensor or numpy).
        locations: (..., J, 3) local basis locations.
    Returns:
        Pose in armature space (tensors; float64 when given numpy).
    """
    rot = torch.as_tensor(rotations)
    if not rot.is_floating_point():
        rot = rot.double()
    loc = torch.as_tensor(locations, dtype=rot.dtype)
    fk = ForwardKinematics(skeleton, dtype=rot.dtype, device=rot.device)
    return fk(quat_to_matrix(rot), loc)


def to_world(object_matrix, pose: Pose) -> Pose:
    """Map an armature-space Pose to world space with the armature object's (4, 4) matrix.

    Positions get the full affine map; rotations get the matrix's rotation (scale removed), so bone axes
    stay orthonormal.
    """
    M = torch.as_tensor(np.asarray(object_matrix), dtype=pose.positions.dtype, device=pose.positions.device)
    A = M[:3, :3]
    scale = A.norm(dim=0)  # per-column scale
    R = A / scale
    pos = pose.positions @ A.T + M[:3, 3]
    return Pose(R @ pose.rotations, pos)


def global_matrices(skeleton: Skeleton, basis=None) -> np.ndarray:
    """Armature-space bone matrices of one pose, numpy in and out (``ForwardKinematics`` in float64).

    Args:
        skeleton: the Skeleton.
        basis: (J, 4) WXYZ local basis rotations; None = the rest pose. Basis locations are zero.
    Returns:
        (J, 4, 4) float64 ``pose.bones[j].matrix`` (rotation columns = bone axes, translation = bone head).
    """
    J = skeleton.num_bones
    q = np.tile([1.0, 0.0, 0.0, 0.0], (J, 1)) if basis is None else np.asarray(basis, dtype=np.float64)
    pose = forward_kinematics(skeleton, q, np.zeros((J, 3)))
    G = np.tile(np.eye(4), (J, 1, 1))
    G[:, :3, :3] = pose.rotations.numpy()
    G[:, :3, 3] = pose.positions.numpy()
    return G
