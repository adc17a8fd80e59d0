"""Blender <-> core bridge: read armatures, skinned meshes and animation into ``core`` types, write Actions.

Everything here imports bpy; nothing here imports torch at module level. Spaces and units: docs/bridge.md.
"""

from .errors import BridgeError
from .io import find_armature, gltf_frame_rate, import_file
from .animation import read_motion
from .read import find_meshes, read_skeleton, read_skinned_mesh
from .write import write_motion

__all__ = ["BridgeError", "find_armature", "find_meshes", "gltf_frame_rate", "import_file", "read_motion",
           "read_skeleton", "read_skinned_mesh", "write_motion"]
