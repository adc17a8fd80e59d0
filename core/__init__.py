"""ReConForM core: pure numpy / torch / POT. Never imports bpy or mathutils.

Conventions (shapes, quaternion order, spaces) are written once in ``docs/conventions.md``.
"""

from .errors import CoreError
from .types import Character, KeyVertexSet, Motion, Skeleton, SkinnedMesh

__all__ = ["CoreError", "Character", "KeyVertexSet", "Motion", "Skeleton", "SkinnedMesh"]
