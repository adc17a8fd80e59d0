"""The panels that set a retarget up: ReConForM (characters, clip, PyTorch status), Partners, Bone Map, Meshes,
Key Vertices."""

from bpy.types import Panel, UIList

from .. import deps
from ..bridge import bodyparts, find_meshes
from ..bridge import keyverts as kvstore
from .common import _Base, wrapped_label


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
