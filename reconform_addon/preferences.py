"""Add-on preferences: default solver device and the PyTorch status with its guided install."""


import bpy
from bpy.props import EnumProperty

from . import deps

DEVICE_ITEMS = (
    ('CPU', "CPU", "Solve on the CPU (always available)"),
    ('CUDA', "CUDA", "Solve on the first NVIDIA GPU (needs a CUDA build of PyTorch)"),
)


def addon_package() -> str:
    """``bl_idname`` of the preferences: the extension's package (``bl_ext.<repo>.reconform``)."""
    return __package__.rsplit(".", 1)[0]


def get(context=None):
    """This add-on's preferences, or None when it is not enabled through addon_utils (plain imports in tests)."""
    context = context or bpy.context
    addon = context.preferences.addons.get(addon_package())
    return addon.preferences if addon else None


class RECONFORM_OT_copy_install_command(bpy.types.Operator):
    """Copy the command line that installs PyTorch for Blender's Python into this extension's user folder"""

    bl_idname = "reconform.copy_install_command"
    bl_label = "Copy Install Command"
    bl_options = {'INTERNAL'}

    def execute(self, context):
        cmd = deps.install_command(deps.user_site_dir(create=True))
        context.window_manager.clipboard = cmd
        self.report({'INFO'}, "Install command copied: run it in a terminal, then restart Blender")
        return {'FINISHED'}


class RECONFORM_OT_check_torch(bpy.types.Operator):
    """Look for PyTorch again (after installing it without restarting Blender)"""

    bl_idname = "reconform.check_torch"
    bl_label = "Check Again"
    bl_options = {'INTERNAL'}

    def execute(self, context):
        deps.ensure_user_site_on_path()
        ok, msg = deps.torch_status(refresh=True)
        self.report({'INFO'} if ok else {'WARNING'}, msg)
        return {'FINISHED'}


class RECONFORM_AddonPreferences(bpy.types.AddonPreferences):
    bl_idname = addon_package()

    default_device: EnumProperty(
        name="Default Device", items=DEVICE_ITEMS, default='CPU',
        description="Device new scenes use for the ReConForM solver")

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.prop(self, "default_device")
        box = layout.box()
        ok, msg = deps.torch_status()
        box.label(text=msg, icon='CHECKMARK' if ok else 'ERROR')
        if not ok:
            for line in deps.missing_message()[2:3]:
                box.label(text=line)
            box.label(text=f"Target folder: {deps.user_site_dir()}")
            row = box.row()
            row.operator(RECONFORM_OT_copy_install_command.bl_idname, icon='COPYDOWN')
        box.operator(RECONFORM_OT_check_torch.bl_idname, icon='FILE_REFRESH')


classes = (RECONFORM_OT_copy_install_command, RECONFORM_OT_check_torch, RECONFORM_AddonPreferences)


def register():
    deps.ensure_user_site_on_path()
