"""A character's clip evaluated once: ``ClipTrack``.

A retarget reads the source clip in many places: copy-rotations (world bone rotations, the hips), the source
floor (``core.contacts.ground``: the feet's lowest points), the solver (key-vertex paths, sole points, each foot's
lowest point and velocity) and the metrics (joints, feet, the whole skinned mesh). ``ClipTrack`` runs forward
kinematics over the clip once (float64, in chunks of frames) and computes each of these on first use, so a
retarget builds one track of its source and hands it to everyone (``core.pipeline.retarget``). The same class serves
the target's clips (copy-rotations' result, the solved motion) in the metrics and the solver's set-up.

Arrays are world space (metres, Z up) unless named ``arm``; frames run along axis 0.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..rig.affine import inv
from ..errors import CoreError
from ..contacts.feet import foot_vertices
from ..rig.kinematics import ForwardKinematics
from ..rig.rotations import quat_to_matrix
from ..rig.skinning import bind_matrices, skin_vertices
from ..types import Character, Motion

#: frames per chunk of the forward-kinematics and skinning passes (bounds their temporary memory)
CHUNK = 512


def _frames(value, start: int, stop: int):
    """Frames [start, stop) of a per-frame quantity: an array or tensor (T, ...), or a tuple / list of them."""
    if isinstance(value, (tuple, list)):
        return type(value)(_frames(v, start, stop) for v in value)
    return value[start:stop]


#: ClipTrack's cached per-frame quantities, (T, ...) first (``ClipTrack.slice`` carries them)
_PER_FRAME = ("_fk", "_skin", "world_positions", "world_rotations", "foot_points", "lowest_foot", "keyverts")


class ClipTrack:
    """One character's clip, evaluated once (lazily, each quantity on first use).

    Args:
        character: the Character (skeleton; mesh, bone map and key vertices where the quantities need them).
        motion: its Motion, (T, J, ...) pose channels.
    Attributes (computed on first use, then kept):
        arm_rotations (T, J, 3, 3), arm_positions (T, J, 3): armature-space bone transforms (float64 tensors).
        world_rotations (T, J, 3, 3), world_positions (T, J, 3): the same in world space (numpy; rotations with
            the object's scale removed).
        foot_ids: [left, right] mesh vertices of each foot (``core.contacts.feet.foot_vertices``).
        foot_points: [left, right] (T, F_k, 3) world positions of those vertices.
        lowest_foot: (T,) world z of the lowest foot vertex per frame.
        keyverts: (positions (T, N, 3), unit normals (T, N, 3)) of the key vertices, world.
    """

    def __init__(self, character: Character, motion: Motion):
        J = character.skeleton.num_bones
        if motion.rotations.shape[1] != J:
            raise CoreError(f"The clip has {motion.rotations.shape[1]} bone channels but armature "
                            f"'{character.name}' has {J} bones: read the motion from that armature.")
        self.character = character
        self.motion = motion
        self._memo = {}

    def slice(self, start: int, stop: int) -> "ClipTrack":
        """The track of clip frames [start, stop) (``Motion.slice``), holding as views what this track has already
        computed per frame (bone transforms, skinning transforms, key-vertex paths, the lowest foot) instead of
        computing it again: the windows of one clip share their source's. The rest is computed on the slice when
        first used; derived quantities (``memo``) are not carried."""
        out = ClipTrack(self.character, self.motion.slice(start, stop))
        have, into = self.__dict__, out.__dict__
        for name in _PER_FRAME:
            if name in have:
                into[name] = _frames(have[name], start, stop)
        if "foot_ids" in have:
            into["foot_ids"] = have["foot_ids"]
        return out

    def memo_steps(self, key, steps):
        """Generator: the fractions ``steps()`` yields, then its return value, computed once per ``key`` and kept
        (``memo`` for a computation that reports its progress)."""
        if key not in self._memo:
            self._memo[key] = yield from steps()
        return self._memo[key]

    def memo(self, key, compute):
        """``compute()``, computed once per ``key`` for this track and kept (derived quantities such as the
        metrics' measures over a given ground)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @property
    def num_frames(self) -> int:
        return self.motion.num_frames

    @property
    def fps(self) -> float:
        return float(self.motion.fps)

    # -- bones ------------------------------------------------------------------------------------------------

    @functools.cached_property
    def _fk(self):
        sk, mo = self.character.skeleton, self.motion
        fk = ForwardKinematics(sk, dtype=torch.float64)
        T, J = mo.num_frames, sk.num_bones
        rot = torch.empty((T, J, 3, 3), dtype=torch.float64)
        pos = torch.empty((T, J, 3), dtype=torch.float64)
        with torch.no_grad():
            for s in range(0, T, CHUNK):
                e = min(T, s + CHUNK)
                pose = fk(quat_to_matrix(torch.as_tensor(mo.rotations[s:e])), torch.as_tensor(mo.locations[s:e]))
                rot[s:e], pos[s:e] = pose.rotations, pose.positions
        return rot, pos

    @property
    def arm_rotations(self) -> torch.Tensor:
        return self._fk[0]

    @property
    def arm_positions(self) -> torch.Tensor:
        return self._fk[1]

    @functools.cached_property
    def world_positions(self) -> np.ndarray:
        M = self.character.skeleton.object_matrix
        return self.arm_positions.numpy() @ M[:3, :3].T + M[:3, 3]

    @functools.cached_property
    def world_rotations(self) -> np.ndarray:
        A = self.character.skeleton.object_matrix[:3, :3]
        return (A / np.linalg.norm(A, axis=0)) @ self.arm_rotations.numpy()

    @functools.cached_property
    def _skin(self):
        """Armature-space skinning transforms S_j = G_j · B_j⁻¹ (B: ``core.rig.skinning.bind_matrices``, the rest pose
        or the pose the mesh is bound in): (T, J, 3, 3), (T, J, 3)."""
        bind_inv = inv(bind_matrices(self.character.skeleton, self.character.mesh))
        inv_rot, inv_trans = torch.as_tensor(bind_inv[:, :3, :3]), torch.as_tensor(bind_inv[:, :3, 3])
        rot, pos = self._fk
        return rot @ inv_rot, (rot @ inv_trans[..., None])[..., 0] + pos

    # -- mesh vertices ---------------------------------------------------------------------------------------

    def _mesh(self):
        mesh = self.character.mesh
        if mesh is None:
            raise CoreError(f"Character '{self.character.name}' has no mesh: fit a body to it first.")
        return mesh

    def vertices(self, vertex_ids, normals: bool = False, frames=None):
        """World positions (T, V, 3) float64 numpy of mesh vertices ``vertex_ids`` (V,) over the clip (or the
        clip frames ``frames``), and their unit normals (T, V, 3) with ``normals``."""
        mesh = self._mesh()
        ids = np.asarray(vertex_ids, dtype=np.int64)
        S_rot, S_t = self._skin
        if frames is not None:
            fr = torch.as_tensor(np.asarray(frames, dtype=np.int64))
            S_rot, S_t = S_rot.index_select(0, fr), S_t.index_select(0, fr)
        M = self.character.skeleton.object_matrix
        A = torch.as_tensor(M[:3, :3])
        R = A / A.norm(dim=0)
        b = torch.as_tensor(M[:3, 3])
        T = S_rot.shape[0]
        pos = np.empty((T, len(ids), 3))
        nrm = np.empty((T, len(ids), 3)) if normals else None
        rest_n = mesh.rest_normals[ids] if normals else None
        with torch.no_grad():
            for s in range(0, T, CHUNK):
                e = min(T, s + CHUNK)
                p, n = skin_vertices(S_rot[s:e], S_t[s:e], mesh.rest_verts[ids], mesh.weight_bones[ids],
                                     mesh.weight_values[ids], rest_n)
                pos[s:e] = (p @ A.T + b).numpy()
                if normals:
                    n = n @ R.T
                    nrm[s:e] = (n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)).numpy()
        return (pos, nrm) if normals else pos

    def skinning_chunks(self, chunk: int = CHUNK):
        """Yield (frame slice, skinning rotations (B, J, 3, 3), translations (B, J, 3)) in armature space, for
        passes over the whole mesh that must not hold every frame at once (the metrics)."""
        S_rot, S_t = self._skin
        for s in range(0, self.num_frames, chunk):
            e = min(self.num_frames, s + chunk)
            yield slice(s, e), S_rot[s:e], S_t[s:e]

    @functools.cached_property
    def foot_ids(self) -> list:
        self._mesh()
        return foot_vertices(self.character)

    @functools.cached_property
    def foot_points(self) -> list:
        return [self.vertices(ids) for ids in self.foot_ids]

    @functools.cached_property
    def lowest_foot(self) -> np.ndarray:
        """(T,) world z of the lowest foot vertex per frame (metres): from ``foot_points`` when they are kept, else
        CHUNK frames at a time without keeping them (the source's floor of a windowed retarget reads only this)."""
        ids = [i for i in self.foot_ids if len(i)]
        if not ids:
            raise CoreError(f"Character '{self.character.name}': no mesh vertices are skinned to its feet; map "
                            f"left_foot and right_foot in its bone map.")
        if "foot_points" in self.__dict__:
            return np.concatenate([p[..., 2] for p in self.foot_points if p.shape[1]], axis=1).min(axis=1)
        out = np.empty(self.num_frames)
        for s in range(0, self.num_frames, CHUNK):
            frames = np.arange(s, min(self.num_frames, s + CHUNK))
            out[s:s + CHUNK] = np.concatenate([self.vertices(i, frames=frames)[..., 2] for i in ids], axis=1).min(1)
        return out

    @functools.cached_property
    def keyverts(self) -> tuple:
        kv = self.character.keyverts
        if kv is None or len(kv) == 0:
            raise CoreError(f"Character '{self.character.name}' has no key vertices: transfer them first.")
        return self.vertices(kv.vertex_ids, normals=True)
