"""The panels that run it: Solver (> Advanced) and Retarget (button, progress, status, Live)."""

from bpy.types import Panel

from .. import deps, live, session
from ..advanced_fields import ADVANCED_NAMES
from .common import _Base


def draw_ground(col, s):
    """Ground: World Floor / Object, and the object picker."""
    col.prop(s, "ground")
    if s.ground == 'OBJECT':
        col.prop(s, "ground_object", text="Object", icon='MESH_DATA')
        if s.ground_object is None:
            col.label(text="Pick the mesh the target walks on", icon='ERROR')


class VIEW3D_PT_reconform_solver(_Base, Panel):
    bl_label = "Solver"
    bl_idname = "VIEW3D_PT_reconform_solver"
    bl_parent_id = "VIEW3D_PT_reconform"

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and s.method == 'RECONFORM'

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        layout.row().prop(s, "quality", expand=True)
        col = layout.column()
        col.use_property_split = True
        col.use_property_decorate = False
        col.prop(s, "device")
        if s.device == 'DEFAULT':
            col.label(text=f"Preferences default: {s.effective_device()}")
        if s.effective_device() == 'CUDA' and not deps.cuda_available():
            col.label(text="No CUDA device seen by PyTorch: the solve will fail", icon='ERROR')
        col.prop(s, "source_ground")
        if s.source_ground == 'CUSTOM':
            col.prop(s, "source_ground_level")
        draw_ground(col, s)
        col.prop(s, "push_to_nla")


class VIEW3D_PT_reconform_solver_advanced(_Base, Panel):
    bl_label = "Advanced"
    bl_idname = "VIEW3D_PT_reconform_solver_advanced"
    bl_parent_id = "VIEW3D_PT_reconform_solver"
    bl_options = {'DEFAULT_CLOSED'}

    def draw_header(self, context):
        self.layout.prop(context.scene.reconform, "use_advanced", text="")

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        layout.operator("reconform.apply_preset", icon='PRESET')
        col = layout.column(align=True)
        col.use_property_split = True
        col.use_property_decorate = False
        col.enabled = s.use_advanced
        for name in ADVANCED_NAMES:
            col.prop(s, name)
        layout.prop(s, "warm_start_fraction")


class VIEW3D_PT_reconform_run(_Base, Panel):
    bl_label = "Retarget"
    bl_idname = "VIEW3D_PT_reconform_run"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'HIDE_HEADER'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        running = session.is_running(context.scene)
        col = layout.column()
        if s.method == 'COPY_ROTATIONS':
            col.prop(s, "push_to_nla")
        row = col.row()
        row.scale_y = 1.5
        row.enabled = not running
        row.operator("reconform.retarget", icon='PLAY')
        if s.method == 'RECONFORM':
            on = live.is_live(context.scene)
            row = col.row(align=True)
            row.enabled = not running
            row.operator("reconform.live", text="Live", icon='REC' if on else 'PLAY', depress=on)
            row.prop(s, "live_window", text="Window")
            if live.status(context.scene):
                col.label(text=live.status(context.scene), icon='TIME')
        if running:
            col.progress(factor=s.progress, type='BAR', text=s.status or "Solving…")
            col.label(text="Esc cancels (the scene is left unchanged)", icon='CANCEL')
        elif s.status:
            col.label(text=s.status, icon='INFO')
        if s.last_action is not None:
            col.label(text=f"Result: {s.last_action.name}", icon='ACTION')
