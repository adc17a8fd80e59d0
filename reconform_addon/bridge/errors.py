"""The bridge's error type: one line that names the object or file and says what to do."""


class BridgeError(Exception):
    """Raised for bad input on the Blender side (missing object, armature without a mesh, unreadable file)."""
