"""Load Preset Values (``reconform.apply_preset``): the quality preset's values copied into the Solver panel's
advanced fields."""

import bpy

from .. import deps
from .common import settings_of


class RECONFORM_OT_apply_preset(bpy.types.Operator):
    """Copy the quality preset's values into the advanced fields"""

    bl_idname = "reconform.apply_preset"
    bl_label = "Load Preset Values"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        ok, msg = deps.torch_status()
        if not ok:
            self.report({'ERROR'}, "PyTorch is missing: " + msg)
            return {'CANCELLED'}
        settings_of(context).apply_preset()
        return {'FINISHED'}


classes = (RECONFORM_OT_apply_preset,)
