"""Plain data passed between the Blender bridge and the core (numpy arrays, float64 unless stated).

Spaces: every array is in the armature's *armature space* (Blender's ``bone.matrix_local`` space);
``Skeleton.object_matrix`` maps it to world space (metres, Z up).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import CoreError


@dataclass(frozen=True)
class Skeleton:
    """A rigid-bone hierarchy.

    Attributes:
        name: armature object name (for messages).
        names: (J,) bone names.
        parents: (J,) int64, ``parents[0] == -1`` and ``parents[j] < j`` (topological order).
        rest_local: (J, 4, 4) rest matrix of each bone relative to its parent's rest matrix
            (``parent.matrix_local^-1 @ bone.matrix_local``; armature space for roots).
        object_matrix: (4, 4) armature object's world matrix (may carry scale, e.g. 0.01 for FBX in cm).
    """

    name: str
    names: tuple
    parents: np.ndarray
    rest_local: np.ndarray
    object_matrix: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self):
        parents = np.asarray(self.parents, dtype=np.int64)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "rest_local", np.asarray(self.rest_local, dtype=np.float64))
        object.__setattr__(self, "object_matrix", np.asarray(self.object_matrix, dtype=np.float64))
        J = len(self.names)
        if J == 0:
            raise CoreError(f"Armature '{self.name}' has no bones: add bones or pick another armature.")
        if parents.shape != (J,) or self.rest_local.shape != (J, 4, 4):
            raise CoreError(f"Armature '{self.name}': inconsistent skeleton arrays "
                            f"({J} names, parents {parents.shape}, rest_local {self.rest_local.shape}).")
        if np.any(parents >= np.arange(J)) or (parents < -1).any():
            raise CoreError(f"Armature '{self.name}': bones are not in topological order (parents[j] < j).")

    @property
    def num_bones(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Index of bone ``name``; raises CoreError naming the armature when absent."""
        try:
            return self.names.index(name)
        except ValueError:
            raise CoreError(f"Armature '{self.name}' has no bone named '{name}'.") from None

    @property
    def metres_per_unit(self) -> float:
        """Metres per armature unit: the cube root of ``object_matrix``'s scale (1 where it has none)."""
        return float(np.cbrt(abs(np.linalg.det(self.object_matrix[:3, :3])))) or 1.0

    @property
    def rest_global(self) -> np.ndarray:
        """(J, 4, 4) rest matrices in armature space (Blender's ``bone.matrix_local``)."""
        out = np.empty_like(self.rest_local)
        for j, p in enumerate(self.parents):
            out[j] = self.rest_local[j] if p < 0 else out[p] @ self.rest_local[j]
        return out

    @property
    def depths(self) -> np.ndarray:
        """(J,) int64 depth of each bone in the tree (roots are 0)."""
        d = np.zeros(self.num_bones, dtype=np.int64)
        for j, p in enumerate(self.parents):
            d[j] = 0 if p < 0 else d[p] + 1
        return d

    def children(self, j: int) -> list:
        return [int(c) for c in np.nonzero(self.parents == j)[0]]


@dataclass(frozen=True)
class SkinnedMesh:
    """A mesh deformed by a Skeleton through linear blend skinning.

    Several mesh objects on one armature are merged by the bridge; ``part`` tells them apart.

    Attributes:
        name: mesh object name(s), for messages.
        rest_verts: (V, 3) rest-pose vertices in the armature's armature space.
        rest_normals: (V, 3) unit rest-pose vertex normals, same space.
        face_indices: (L,) int64 vertex indices of all polygons, concatenated.
        face_offsets: (F + 1,) int64, polygon f uses ``face_indices[face_offsets[f]:face_offsets[f+1]]``.
        weight_bones: (V, K) int64 bone indices into the Skeleton (padding entries have weight 0).
        weight_values: (V, K) float64 skin weights, rows sum to 1 (rows of unweighted vertices are 0).
        part: (V,) int64 index of the source mesh object of each vertex (0 when there is one object).
        part_names: names of the mesh objects, indexed by ``part``.
        bind_global: (J, 4, 4) armature-space bone matrices of the pose the mesh is bound in (``rest_verts`` and
            ``rest_normals`` are that pose's); None: the skeleton's rest pose (``core.rig.skinning.bind_matrices``).
            A body fitted to a skeleton-only character is bound in its T-pose (``core.body.fit``).
        fitted: True for such a fitted template body: where its limbs overlap each other, the fit does, not the
            character (the self-contact barrier does not copy those depths, docs/solver.md).
    """

    name: str
    rest_verts: np.ndarray
    rest_normals: np.ndarray
    face_indices: np.ndarray
    face_offsets: np.ndarray
    weight_bones: np.ndarray
    weight_values: np.ndarray
    part: np.ndarray = None
    part_names: tuple = ()
    bind_global: np.ndarray = None
    fitted: bool = False

    def __post_init__(self):
        V = len(self.rest_verts)
        if self.part is None:
            object.__setattr__(self, "part", np.zeros(V, dtype=np.int64))
        if not self.part_names:
            object.__setattr__(self, "part_names", (self.name,))
        if V == 0:
            raise CoreError(f"Mesh '{self.name}' has no vertices.")
        if self.weight_bones.shape != self.weight_values.shape or len(self.weight_bones) != V:
            raise CoreError(f"Mesh '{self.name}': skin weight arrays do not match its {V} vertices.")

    @property
    def num_verts(self) -> int:
        return len(self.rest_verts)

    def dominant_bones(self) -> np.ndarray:
        """(V,) int64 skeleton index of each vertex's most weighted bone."""
        return self.weight_bones[np.arange(self.num_verts), np.argmax(self.weight_values, axis=1)]

    @property
    def face_sizes(self) -> np.ndarray:
        """(F,) number of vertices of each polygon."""
        return np.diff(self.face_offsets)

    def triangles(self) -> np.ndarray:
        """(Ft, 3) int64 fan triangulation of every polygon."""
        tris = []
        sizes = self.face_sizes
        for n in np.unique(sizes):
            if n < 3:
                continue
            starts = self.face_offsets[:-1][sizes == n]
            for k in range(1, n - 1):
                tris.append(np.stack([self.face_indices[starts], self.face_indices[starts + k],
                                      self.face_indices[starts + k + 1]], axis=1))
        return np.concatenate(tris, axis=0) if tris else np.zeros((0, 3), dtype=np.int64)

    def dense_weights(self, num_bones: int) -> np.ndarray:
        """(V, J) dense skin-weight matrix."""
        W = np.zeros((self.num_verts, num_bones))
        rows = np.repeat(np.arange(self.num_verts), self.weight_bones.shape[1])
        np.add.at(W, (rows, self.weight_bones.ravel()), self.weight_values.ravel())
        return W


@dataclass
class Motion:
    """An animation of one Skeleton as Blender pose-bone channels (``matrix_basis``), sampled per frame.

    Attributes:
        rotations: (T, J, 4) WXYZ unit quaternions, each bone's rotation relative to its rest pose.
        locations: (T, J, 3) each bone's location relative to its rest pose, in its rest frame (armature units).
        fps: frames per second of the clip.
        frame_start: scene frame of ``rotations[0]``.
    """

    rotations: np.ndarray
    locations: np.ndarray
    fps: float = 30.0
    frame_start: int = 1

    def __post_init__(self):
        self.rotations = np.asarray(self.rotations, dtype=np.float64)
        self.locations = np.asarray(self.locations, dtype=np.float64)
        if self.rotations.ndim != 3 or self.rotations.shape[-1] != 4:
            raise CoreError(f"Motion rotations must be (T, J, 4) WXYZ, got {self.rotations.shape}.")
        if self.locations.shape != self.rotations.shape[:2] + (3,):
            raise CoreError(f"Motion locations must be (T, J, 3), got {self.locations.shape}.")
        if self.fps <= 0:
            raise CoreError(f"Motion fps must be positive, got {self.fps}.")

    @property
    def num_frames(self) -> int:
        return self.rotations.shape[0]

    @classmethod
    def rest(cls, num_frames: int, num_bones: int, fps: float = 30.0, frame_start: int = 1) -> "Motion":
        rot = np.zeros((num_frames, num_bones, 4))
        rot[..., 0] = 1.0
        return cls(rot, np.zeros((num_frames, num_bones, 3)), fps, frame_start)

    def slice(self, start: int, stop: int) -> "Motion":
        """Frames [start, stop) as a new Motion (indices into this clip, not scene frames)."""
        return Motion(self.rotations[start:stop].copy(), self.locations[start:stop].copy(), self.fps,
                      self.frame_start + start)


@dataclass(frozen=True)
class KeyVertexSet:
    """Key vertices of one character: chosen vertices of its SkinnedMesh.

    Attributes:
        names: (N,) stable names from the template (``left_palm``, ``face_center``, ...).
        limbs: (N,) limb of each key vertex (``core.rig.humanoid.LIMBS``).
        vertex_ids: (N,) int64 indices into the character's SkinnedMesh.
        locked: (N,) bool, True where a user placed the vertex by hand (re-transfer keeps it).
        eye: name of the key vertex used as the eye for gaze (the face centre).
    """

    names: tuple
    limbs: tuple
    vertex_ids: np.ndarray
    locked: np.ndarray = None
    eye: str = "face_center"

    def __post_init__(self):
        ids = np.asarray(self.vertex_ids, dtype=np.int64)
        object.__setattr__(self, "vertex_ids", ids)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "limbs", tuple(self.limbs))
        locked = np.zeros(len(ids), bool) if self.locked is None else np.asarray(self.locked, dtype=bool)
        object.__setattr__(self, "locked", locked)
        if not (len(self.names) == len(self.limbs) == len(ids) == len(locked)):
            raise CoreError("KeyVertexSet: names, limbs, vertex_ids and locked must have the same length.")

    def __len__(self):
        return len(self.vertex_ids)


@dataclass(frozen=True, eq=False)
class Character:
    """Everything the core needs about one character (immutable: ``dataclasses.replace`` makes a changed copy;
    ``core.character.complete.build_character`` completes one from what the scene holds).

    Attributes:
        skeleton: its Skeleton.
        mesh: its SkinnedMesh (all deforming mesh objects merged), or None for a skeleton-only source
            until a body is fitted to it (``core.body``).
        bone_map: {canonical humanoid bone name: bone name} (``core.rig.humanoid``).
        keyverts: its KeyVertexSet, once transferred.
        height: h_c, world-space height of the mesh in T-pose (metres), once measured.
        rig: a ``core.rig.rehang.Rehung`` when ``skeleton`` is a re-hung copy of the scene's rig (limb ends such as
            IK feet parented elsewhere than their canonical parent): it converts motions to and from the rig's
            channels; None when ``skeleton`` is the rig itself.
    """

    skeleton: Skeleton
    mesh: SkinnedMesh = None
    bone_map: dict = field(default_factory=dict)
    keyverts: KeyVertexSet = None
    height: float = None
    rig: object = None

    @property
    def name(self) -> str:
        return self.skeleton.name
