"""Which meshes form a character's body: the panel's Meshes list sets each mesh to Auto, Body or Leave Out
(stored on the armature, ``bridge.bodyparts``; the next retarget or transfer reads it)."""

from __future__ import annotations

from dataclasses import dataclass

import bpy

from ..bridge import BridgeError, bodyparts
from .common import Done, RoleMixin, role_armature, run, settings_of


@dataclass(frozen=True)
class MeshUseOptions:
    """One mesh of the role's character and what it is."""

    role: str       #: 'SOURCE' or 'TARGET'
    mesh: str       #: mesh object name
    use: str        #: 'AUTO', 'BODY' or 'LEAVE_OUT'


def set_use(s, options: MeshUseOptions) -> Done:
    """Store the choice on the role's armature."""
    arm = role_armature(s, options.role)
    ob = bpy.data.objects.get(options.mesh)
    if ob is None:
        raise BridgeError(f"No object named '{options.mesh}'.")
    bodyparts.set_mesh_use(arm, ob, options.use)
    words = {'AUTO': "read automatically", 'BODY': "part of the body", 'LEAVE_OUT': "left out"}
    return Done(f"'{ob.name}' is {words[options.use]} for '{arm.name}' from the next retarget or transfer")


class RECONFORM_OT_set_mesh_use(RoleMixin, bpy.types.Operator):
    """Say whether this mesh is part of the character's body (Auto: clothing, eyes and props are left out)"""

    bl_idname = "reconform.set_mesh_use"
    bl_label = "Mesh Use"
    bl_options = {'REGISTER', 'UNDO', 'INTERNAL'}

    mesh: bpy.props.StringProperty(name="Mesh")
    use: bpy.props.EnumProperty(name="Use", items=[(u, u.replace("_", " ").title(), "") for u in bodyparts.USES])

    def execute(self, context):
        return run(self, set_use, settings_of(context), MeshUseOptions(self.role, self.mesh, self.use),
                   redraw=context)


classes = (RECONFORM_OT_set_mesh_use,)
