"""The target's ground object (ReConForM §6.2): any object with a surface -> ``core.contacts.terrain.GroundSurface``.

``read_ground`` takes the object as the viewport shows it: its *evaluated* mesh (modifiers, shape keys,
constraints and drivers applied) in world space (its transform, scale and rotation included), triangulated.
The core then samples it into a height field over the region the clip's feet reach (``core.contacts.terrain``): the
whole object is read, never the whole object sampled. Instances made by Geometry Nodes or particles are not
part of an object's evaluated mesh: realise them first.

``find_ground`` finds the object by name in the scene or among objects imported from a file (the batch
command's ``--ground`` / a set-up's ``"ground"``).
"""

from __future__ import annotations

import bpy
import numpy as np

from .errors import BridgeError
from .read import find_meshes

#: object types whose evaluated geometry is a surface (``Object.to_mesh`` gives their mesh)
GROUND_TYPES = ('MESH', 'CURVE', 'SURFACE', 'FONT', 'META')


def check_ground(obj, characters=()):
    """Raise a one-line BridgeError when ``obj`` cannot be the ground of ``characters`` (armature objects)."""
    if obj is None:
        raise BridgeError("No ground object: pick the mesh the target walks on, or choose World Floor.")
    if obj.type not in GROUND_TYPES:
        raise BridgeError(f"Ground '{obj.name}' is a {obj.type.lower()}, not a mesh: pick the mesh object the "
                          "target walks on (stairs, a ramp, a terrain).")
    for arm in characters:
        if arm is not None and (obj == arm or obj in find_meshes(arm)):
            raise BridgeError(f"Ground '{obj.name}' is part of character '{arm.name}': pick the mesh the "
                              "character walks on.")


def read_ground(obj, *, spacing=None, ceiling=None, characters=(), depsgraph=None):
    """``obj``'s evaluated surface as a ``core.contacts.terrain.GroundSurface`` (world-space triangles).

    Args:
        spacing: grid spacing (metres) of the height field the core samples (None: the core's default).
        ceiling: world z above which the object's surfaces are ignored (None: its top surface is the ground).
        characters: the armatures of the retarget (the ground must not be one of them or their meshes).
    Raises BridgeError (one line, naming the object) when it has no faces or is not a surface.
    """
    from ...core.contacts.terrain import GroundSurface   # imports torch: only when a retarget reads its ground

    check_ground(obj, characters)
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    ob_e = obj.evaluated_get(depsgraph)
    me = ob_e.to_mesh()
    try:
        if me is None:
            raise BridgeError(f"Ground '{obj.name}' has no surface: pick a mesh object.")
        me.calc_loop_triangles()
        co = np.empty(len(me.vertices) * 3, dtype=np.float64)
        me.vertices.foreach_get("co", co)
        tri = np.empty(len(me.loop_triangles) * 3, dtype=np.int32)
        me.loop_triangles.foreach_get("vertices", tri)
        mw = np.array(ob_e.matrix_world, dtype=np.float64)
    finally:
        ob_e.to_mesh_clear()
    if not len(tri):
        raise BridgeError(f"Ground '{obj.name}' has no faces (only vertices or edges): give it a surface to "
                          "stand on, or pick another object.")
    world = co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3]
    return GroundSurface(obj.name, world, tri.reshape(-1, 3).astype(np.int64), spacing, ceiling)


def find_ground(name=None, objects=None):
    """The ground object called ``name`` among ``objects`` (imported from a file) or in the open file, or the
    only object with a surface among ``objects`` when no name is given. Raises BridgeError otherwise."""
    pool = list(objects) if objects is not None else list(bpy.data.objects)
    if name:
        ob = next((o for o in pool if o.name == name), None)
        if ob is None:
            meshes = ", ".join(sorted(o.name for o in pool if o.type in GROUND_TYPES)[:8]) or "none"
            raise BridgeError(f"No ground object named '{name}' (meshes available: {meshes}).")
        return ob
    surfaces = [o for o in pool if o.type in GROUND_TYPES]
    if len(surfaces) == 1:
        return surfaces[0]
    names = ", ".join(sorted(o.name for o in surfaces)[:8]) or "none"
    raise BridgeError(f"Name the ground object: the file holds {len(surfaces)} meshes ({names}).")
