"""The "ReConForM" tab of the 3D viewport's sidebar (N-panel). Panels only draw; operators do the work.

Layout: ReConForM (characters, clip, PyTorch status) > Partners (more pairs solved together) > Bone Map > Meshes >
Key Vertices > Solver (> Advanced) > Retarget (button, progress, status) > Conflicts > Metrics.
"""

import textwrap

from bpy.types import Panel, UIList

from . import deps, live, session
from ..core import report
from ..core.advice import floor_advice
from .bridge import bodyparts, find_meshes
from .bridge import keyverts as kvstore

CATEGORY = "ReConForM"

def metric_label(key: str) -> str:
    """'floor_pen_mean' -> 'Floor penetration, mean'; 'Hero: grounded_f1' (one target of several retargeted
    together) -> 'Hero: Grounded feet F1' (``core.report``: one list of names and units for the panel, the batch
    report and the demo; the panel prints the unit with each value)."""
    return report.info(key).label


def wrapped_label(layout, text: str, icon: str = 'NONE', width: int = 44):
    """``text`` as several labels of at most ``width`` characters (Blender labels do not wrap)."""
    col = layout.column(align=True)
    for k, line in enumerate(textwrap.wrap(text, width)):
        col.label(text=line, icon=icon if k == 0 else 'BLANK1')


def metric_rows(s) -> list:
    """[(label, result text, copy-rotations text or '', better: True/False/None)] for the Metrics panel, headline
    metrics first (``core.report``)."""
    values = {m.name: m.value for m in s.metrics}
    refs = {m.name: m.reference for m in s.metrics if m.has_reference} or None
    rows = []
    for r in report.metric_rows(values, refs):
        better = {"better": True, "worse": False}.get(r.change)
        rows.append((metric_label(r.info.key), report.format_value(r.info.key, r.value, short=True),
                     report.format_value(r.info.key, r.reference, short=True) if r.reference_text else "", better))
    return rows


def metrics_verdict(s) -> str:
    """The one-line verdict of the last retarget (``core.report.verdict``)."""
    values = {m.name: m.value for m in s.metrics}
    refs = {m.name: m.reference for m in s.metrics if m.has_reference} or None
    method = 'copy_rotations' if s.last_method == 'COPY_ROTATIONS' else 'reconform'
    return report.verdict(values, refs, method)


def conflict_text(c) -> str:
    return f"{c.body_part}: {c.term_a} vs {c.term_b}"


def draw_meshes(col, arm):
    """One line under a character: the meshes it deforms, or the note that a body will be fitted."""
    if arm is None:
        return
    try:
        meshes = find_meshes(arm)
    except Exception:  # noqa: BLE001 - drawing must never fail
        meshes = []
    row = col.row()
    if meshes:
        names = ", ".join(m.name for m in meshes[:3]) + ("…" if len(meshes) > 3 else "")
        row.label(text=names, icon='MESH_DATA')
    else:
        row.label(text="No mesh: a body is fitted to the skeleton", icon='INFO')


def role_header(layout, s, prop: str):
    """The Source/Target switch of a sub-panel (``s.<prop>``); (role, its armature), the armature None after
    saying to pick one."""
    layout.row().prop(s, prop, expand=True)
    role = getattr(s, prop)
    arm = s.character(role)
    if arm is None:
        layout.label(text=f"Pick a {role.lower()} armature first", icon='INFO')
    return role, arm


def draw_ground(col, s):
    """Ground: World Floor / Object, and the object picker."""
    col.prop(s, "ground")
    if s.ground == 'OBJECT':
        col.prop(s, "ground_object", text="Object", icon='MESH_DATA')
        if s.ground_object is None:
            col.label(text="Pick the mesh the target walks on", icon='ERROR')


class _Base:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = CATEGORY

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "reconform", None) is not None


class RECONFORM_UL_bone_map(UIList):
    """Canonical bone | the character's bone (searchable)."""

    bl_idname = "RECONFORM_UL_bone_map"

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0, flt_flag=0):
        arm = data.character(data.bone_map_role)
        row = layout.row(align=True)
        split = row.split(factor=0.42, align=True)
        warn = item.required and not item.bone
        split.label(text=item.canonical, icon='ERROR' if warn else ('BONE_DATA' if item.bone else 'BLANK1'))
        if arm is not None and arm.type == 'ARMATURE':
            split.prop_search(item, "bone", arm.data, "bones", text="")
        else:
            split.prop(item, "bone", text="")

    def filter_items(self, context, data, propname):
        items = getattr(data, propname)
        flags = [self.bitflag_filter_item] * len(items)
        if self.filter_name:
            pat = self.filter_name.lower()
            flags = [self.bitflag_filter_item if (pat in it.canonical.lower() or pat in it.bone.lower()) else 0
                     for it in items]
        return flags, []


#: conflicts listed before the rest is folded (operators.conflicts.SHOWN; panels do not import operators)
SHOWN_CONFLICTS = 3


class RECONFORM_UL_conflicts(UIList):
    """Body part: term A vs term B | go to its frames | balance slider. The costliest first (severity ×
    duration); beyond the first few, rows are folded until Show All."""

    bl_idname = "RECONFORM_UL_conflicts"

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0, flt_flag=0):
        row = layout.row(align=True)
        split = row.split(factor=0.55, align=True)
        split.label(text=conflict_text(item), icon='ERROR' if item.severity > 0.5 else 'INFO')
        sub = split.row(align=True)
        op = sub.operator("reconform.jump_to_conflict", text=str(item.first_frame), icon='TIME')
        op.frame = item.first_frame
        sub.prop(item, "balance", text="", slider=True)

    def filter_items(self, context, data, propname):
        items = getattr(data, propname)
        if data.show_all_conflicts:
            return [self.bitflag_filter_item] * len(items), []
        return [self.bitflag_filter_item if k < SHOWN_CONFLICTS else 0 for k in range(len(items))], []


class VIEW3D_PT_reconform(_Base, Panel):
    bl_label = "ReConForM"
    bl_idname = "VIEW3D_PT_reconform"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        ok, _ = deps.torch_status()
        if not ok:
            box = layout.box()
            lines = deps.missing_message()
            box.label(text=lines[0], icon='ERROR')
            for line in lines[1:]:
                box.label(text=line)
            row = box.row(align=True)
            row.operator("reconform.copy_install_command", icon='COPYDOWN')
            row.operator("reconform.check_torch", icon='FILE_REFRESH')
        col = layout.column()
        col.use_property_split = True
        col.use_property_decorate = False
        col.prop(s, "source", icon='ARMATURE_DATA')
        draw_meshes(col, s.source)
        col.prop(s, "target", icon='ARMATURE_DATA')
        draw_meshes(col, s.target)
        col.separator()
        col.prop(s, "action", icon='ACTION')
        col.prop(s, "use_scene_range")
        if not s.use_scene_range:
            col.prop(s, "use_custom_range")
            if s.use_custom_range:
                sub = col.column(align=True)
                sub.prop(s, "frame_start")
                sub.prop(s, "frame_end", text="End")
        col.prop(s, "method")


class RECONFORM_UL_partners(UIList):
    """Source -> target of one partner pair | its clip."""

    bl_idname = "RECONFORM_UL_partners"

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0, flt_flag=0):
        row = layout.row(align=True)
        row.prop(item, "source", text="", icon='ARMATURE_DATA')
        row.label(text="", icon='FORWARD')
        row.prop(item, "target", text="", icon='ARMATURE_DATA')
        row.prop(item, "action", text="", icon='ACTION')


class VIEW3D_PT_reconform_partners(_Base, Panel):
    bl_label = "Partners"
    bl_idname = "VIEW3D_PT_reconform_partners"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    def draw_header(self, context):
        self.layout.prop(context.scene.reconform, "use_partners", text="")

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        wrapped_label(layout, "More characters retargeted together with Source -> Target: their sources play in "
                              "the same world; contacts between the characters and where they look are kept.",
                      icon='COMMUNITY')
        row = layout.row()
        row.template_list("RECONFORM_UL_partners", "", s, "partners", s, "partners_index", rows=3)
        col = row.column(align=True)
        col.operator("reconform.partner_add", text="", icon='ADD')
        col.operator("reconform.partner_remove", text="", icon='REMOVE')
        if s.use_partners and len(s.partners):
            missing = sum(1 for it in s.partners if it.source is None or it.target is None)
            n = len(s.partners) + 1
            if missing:
                layout.label(text=f"{missing} pair(s) lack a source or a target", icon='ERROR')
            else:
                layout.label(text=f"Retarget solves {n} characters together (one new Action each)", icon='INFO')
        elif len(s.partners):
            layout.label(text="Off: Retarget solves Source -> Target alone", icon='INFO')


class VIEW3D_PT_reconform_bone_map(_Base, Panel):
    bl_label = "Bone Map"
    bl_idname = "VIEW3D_PT_reconform_bone_map"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        role, arm = role_header(layout, s, "bone_map_role")
        if arm is None:
            return
        row = layout.row(align=True)
        row.operator("reconform.detect_bone_map", icon='VIEWZOOM').role = role
        row.operator("reconform.load_builtin_bone_map", text="", icon='PRESET').role = role
        row.operator("reconform.load_bone_map", text="", icon='FILEBROWSER').role = role
        row.operator("reconform.save_bone_map", text="", icon='FILE_TICK').role = role
        items = s.bone_map_items(role)
        owner = getattr(s, f"{role.lower()}_bone_map_owner")
        if not len(items) or owner != arm.name:
            layout.label(text="Not mapped yet: Auto-Detect runs on Retarget if left empty", icon='INFO')
            return
        mapped = sum(1 for it in items if it.bone)
        missing = [it.canonical for it in items if it.required and not it.bone]
        rig = getattr(s, f"{role.lower()}_rig_type")
        layout.label(text=f"{rig or 'Custom'}: {mapped} of {len(items)} mapped",
                     icon='ERROR' if missing else 'CHECKMARK')
        if missing:
            layout.label(text="Missing: " + ", ".join(missing[:4]) + ("…" if len(missing) > 4 else ""))
        layout.template_list("RECONFORM_UL_bone_map", role, s, f"{role.lower()}_bone_map", s,
                             f"{role.lower()}_bone_map_index", rows=6)


class VIEW3D_PT_reconform_meshes(_Base, Panel):
    """Which meshes form each character's body: Auto (clothing, eyes and props left out), Body or Leave Out."""

    bl_label = "Meshes"
    bl_idname = "VIEW3D_PT_reconform_meshes"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        role, arm = role_header(layout, s, "mesh_role")
        if arm is None:
            return
        try:
            meshes = find_meshes(arm)
            read = bodyparts.left_out(arm)
        except Exception:  # noqa: BLE001 - drawing must never fail
            meshes, read = [], None
        last = read or {}
        if not meshes:
            layout.label(text="No mesh: a body is fitted to the skeleton", icon='INFO')
            return
        col = layout.column(align=True)
        for ob in meshes:
            use = bodyparts.mesh_use(arm, ob)
            out = use == 'LEAVE_OUT' or (use == 'AUTO' and ob.name in last)
            row = col.row(align=True)
            row.label(text=ob.name, icon='X' if out else 'MESH_DATA')
            for value, label in (('AUTO', "Auto"), ('BODY', "Body"), ('LEAVE_OUT', "Leave Out")):
                op = row.operator("reconform.set_mesh_use", text=label, depress=use == value)
                op.role, op.mesh, op.use = role, ob.name, value
            if use == 'AUTO' and ob.name in last:
                wrapped_label(col, f"Left out: {last[ob.name]}", icon='BLANK1')
        if read is None and len(meshes) > 1:
            layout.label(text="Auto: read at the next retarget or transfer", icon='INFO')


class VIEW3D_PT_reconform_keyverts(_Base, Panel):
    bl_label = "Key Vertices"
    bl_idname = "VIEW3D_PT_reconform_keyverts"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        row = layout.row()
        row.prop(s, "keyvert_count", expand=True)
        role, arm = role_header(layout, s, "keyvert_role")
        if arm is None:
            return
        try:
            items = kvstore.items(kvstore.holder_mesh(arm))
        except Exception:  # noqa: BLE001 - drawing must never fail
            items = None
        n = len(items) if items is not None else 0
        nl = sum(1 for it in items if it.locked) if n else 0
        col = layout.column(align=True)
        op = col.operator("reconform.transfer_keyverts", icon='GROUP_VERTEX')
        op.role, op.keep_locked = role, True
        sub = col.row(align=True)
        sub.enabled = n > 0
        sub.operator("reconform.reset_keyverts", icon='LOOP_BACK').role = role
        sub.operator("reconform.unlock_keyverts", icon='UNLOCKED').role = role
        if n:
            layout.label(text=f"{n} key vertices, {nl} placed by hand", icon='CHECKMARK')
        else:
            layout.label(text="None yet: Transfer (Retarget does it too)", icon='INFO')
        row = layout.row(align=True)
        row.prop(s, "show_keyverts", icon='HIDE_OFF' if s.show_keyverts else 'HIDE_ON', toggle=True)
        row.prop(s, "keyvert_size", text="Size")
        if s.show_keyverts and n:
            layout.label(text="Drag a sphere; it snaps to the surface on release", icon='MOUSE_LMB_DRAG')


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
        from .properties import ADVANCED_NAMES

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


class VIEW3D_PT_reconform_conflicts(_Base, Panel):
    bl_label = "Conflicts"
    bl_idname = "VIEW3D_PT_reconform_conflicts"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and (len(s.conflicts) > 0 or session.last_solve(context.scene) is not None)

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        if not len(s.conflicts):
            layout.label(text="No conflicting terms in the last solve", icon='CHECKMARK')
        else:
            layout.label(text="Costliest first (severity × duration); left favours the first term")
            layout.template_list("RECONFORM_UL_conflicts", "", s, "conflicts", s, "conflicts_index", rows=3)
            hidden = len(s.conflicts) - SHOWN_CONFLICTS
            if hidden > 0 or s.show_all_conflicts:
                layout.prop(s, "show_all_conflicts", text=f"Show All ({len(s.conflicts)})" if not
                            s.show_all_conflicts else "Show the Costliest Only", toggle=True)
            if 0 <= s.conflicts_index < len(s.conflicts):
                c = s.conflicts[s.conflicts_index]
                box = layout.box()
                box.label(text=conflict_text(c), icon='ERROR' if c.severity > 0.5 else 'INFO')
                box.progress(factor=c.severity, type='BAR', text=f"Severity {c.severity:.2f} (cos {c.cosine:+.2f}), "
                                                                 f"cost {c.score:.2f}")
                if c.frames:
                    row = box.row()
                    row.label(text=f"Frames: {c.frames}")
                    row.operator("reconform.jump_to_conflict", text="Go", icon='TIME').frame = c.first_frame
                box.prop(c, "balance", text=f"{c.term_a}  ⟷  {c.term_b}", slider=True)
        row = layout.row(align=True)
        row.operator("reconform.resolve", icon='FILE_REFRESH')
        row.operator("reconform.reset_conflicts", text="", icon='LOOP_BACK')
        layout.prop(s, "warm_start_fraction")


class VIEW3D_PT_reconform_metrics(_Base, Panel):
    bl_label = "Metrics"
    bl_idname = "VIEW3D_PT_reconform_metrics"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and len(s.metrics) > 0

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        wrapped_label(layout, metrics_verdict(s), icon='CHECKMARK')
        advice = floor_advice({m.name: m.value for m in s.metrics})
        if advice:
            wrapped_label(layout.box(), advice, icon='INFO')
        if s.last_ground:
            wrapped_label(layout, f"Ground: {s.last_ground}", icon='MESH_GRID')
        rows = metric_rows(s)
        has_ref = any(r[2] for r in rows)
        grid = layout.grid_flow(row_major=True, columns=3 if has_ref else 2, even_columns=False, align=True)
        grid.label(text="Metric")
        grid.label(text="Result")
        if has_ref:
            grid.label(text="Copy Rot.")
        for label, val, ref, better in rows:
            grid.label(text=label)
            icon = 'NONE' if better is None else ('TRIA_UP' if better else 'TRIA_DOWN')
            grid.label(text=val, icon=icon)
            if has_ref:
                grid.label(text=ref)


classes = (
    RECONFORM_UL_bone_map,
    RECONFORM_UL_conflicts,
    RECONFORM_UL_partners,
    VIEW3D_PT_reconform,
    VIEW3D_PT_reconform_partners,
    VIEW3D_PT_reconform_bone_map,
    VIEW3D_PT_reconform_meshes,
    VIEW3D_PT_reconform_keyverts,
    VIEW3D_PT_reconform_solver,
    VIEW3D_PT_reconform_solver_advanced,
    VIEW3D_PT_reconform_run,
    VIEW3D_PT_reconform_conflicts,
    VIEW3D_PT_reconform_metrics,
)
