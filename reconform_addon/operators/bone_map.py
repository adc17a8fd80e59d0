"""Bone-map operators: auto-detect, save / load a JSON preset, apply a built-in preset (``core.bonemap``)."""

from __future__ import annotations

from dataclasses import dataclass

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..bridge import BridgeError, read_skeleton
from .common import Done, RoleMixin, error_text, role_armature, run, settings_of


@dataclass(frozen=True)
class BoneMapOptions:
    """What a bone-map operator works on."""

    role: str            #: whose bone map: 'SOURCE' or 'TARGET'
    filepath: str = ""   #: the JSON preset to save or load
    preset: str = ""     #: a built-in preset name (``core.bonemap.list_presets``), 'NONE' when there is none


def detect(s, options: BoneMapOptions) -> Done:
    """Detect the role's bone map from bone names and the hierarchy and fill the panel's list with it."""
    from ...core.bonemap import detect_bone_map

    arm = role_armature(s, options.role)
    res = detect_bone_map(read_skeleton(arm))
    s.set_bone_map(options.role, res.bone_map, res.rig_type, arm.name)
    if res.missing_required:
        return Done(f"'{arm.name}' ({res.rig_type}): required bones not found: "
                    f"{', '.join(res.missing_required)}. Pick them in the list.", 'WARNING')
    return Done(f"'{arm.name}' ({res.rig_type}): {len(res.bone_map)} bones mapped, {len(res.unmapped)} unmapped")


def save(s, options: BoneMapOptions) -> Done:
    """Write the role's bone map to ``options.filepath`` as a JSON preset."""
    from ...core.bonemap import save_bone_map

    role = options.role.lower()
    bm = s.bone_map(options.role)
    if not bm:
        raise BridgeError(f"The {role} bone map is empty: run Auto-Detect or fill the list.")
    try:
        save_bone_map(options.filepath, bm, getattr(s, f"{role}_rig_type"))
    except Exception as ex:  # noqa: BLE001 - the path and the reason, in one line
        raise BridgeError(f"Could not save '{options.filepath}': {error_text(ex)}") from ex
    return Done(f"Saved {len(bm)} bones to {options.filepath}")


def load(s, options: BoneMapOptions) -> Done:
    """Read the JSON preset ``options.filepath`` and fit it to the role's armature."""
    from ...core.bonemap import load_bone_map

    arm = role_armature(s, options.role)
    try:
        bm, rig_type = load_bone_map(options.filepath)
    except Exception as ex:  # noqa: BLE001
        raise BridgeError(f"Could not load '{options.filepath}': {error_text(ex)}") from ex
    return _apply_map(s, options.role, arm, bm, rig_type)


def load_builtin(s, options: BoneMapOptions) -> Done | None:
    """Fit the built-in preset ``options.preset`` to the role's armature (None when there is no preset)."""
    from ...core.bonemap import load_preset

    arm = role_armature(s, options.role)
    if options.preset == 'NONE':
        return None
    bm, rig_type = load_preset(options.preset)
    return _apply_map(s, options.role, arm, bm, rig_type)


def _apply_map(s, role: str, arm, bm: dict, rig_type: str) -> Done:
    """Fit a loaded bone map to ``arm`` (exact names, else ignoring namespaces and case) and store it."""
    from ...core.bonemap import apply_bone_map

    res = apply_bone_map(read_skeleton(arm), bm)
    kept = dict(res.bone_map)
    missing = sorted(set(bm) - set(kept))
    if not kept:
        raise BridgeError(f"None of the preset's bones exist in '{arm.name}': wrong preset for this rig?")
    s.set_bone_map(role, kept, rig_type, arm.name)
    if missing:
        return Done(f"'{arm.name}' lacks {len(missing)} preset bones ({', '.join(missing[:4])}"
                    f"{'…' if len(missing) > 4 else ''}); they are unmapped", 'WARNING')
    return Done(f"Loaded {len(kept)} bones")


# ------------------------------------------------------------------------------------------------------------
class RECONFORM_OT_detect_bone_map(RoleMixin, bpy.types.Operator):
    """Detect which bone plays each canonical humanoid bone, from bone names and the hierarchy"""

    bl_idname = "reconform.detect_bone_map"
    bl_label = "Auto-Detect"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return run(self, detect, settings_of(context), BoneMapOptions(self.role))


class RECONFORM_OT_save_bone_map(RoleMixin, bpy.types.Operator, ExportHelper):
    """Save this character's bone map as a JSON preset"""

    bl_idname = "reconform.save_bone_map"
    bl_label = "Save Bone Map"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    def invoke(self, context, event):
        arm = settings_of(context).character(self.role)
        if arm is not None and not self.filepath:
            self.filepath = bpy.path.clean_name(arm.name) + ".json"
        return ExportHelper.invoke(self, context, event)

    def execute(self, context):
        return run(self, save, settings_of(context), BoneMapOptions(self.role, filepath=self.filepath))


class RECONFORM_OT_load_bone_map(RoleMixin, bpy.types.Operator, ImportHelper):
    """Load a bone map preset (JSON) for this character; bones it names that the armature lacks are skipped"""

    bl_idname = "reconform.load_bone_map"
    bl_label = "Load Bone Map"
    bl_options = {'REGISTER', 'UNDO'}
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    def execute(self, context):
        return run(self, load, settings_of(context), BoneMapOptions(self.role, filepath=self.filepath))


_PRESET_ITEMS = []  # Blender needs dynamic enum strings kept alive on the Python side


def _builtin_preset_items(self, context):
    from ...core.bonemap import list_presets

    _PRESET_ITEMS[:] = [(n, n.replace("_", " ").title(), f"Built-in bone map '{n}'") for n in list_presets()] \
        or [('NONE', "(none)", "No built-in presets")]
    return _PRESET_ITEMS


class RECONFORM_OT_load_builtin_bone_map(RoleMixin, bpy.types.Operator):
    """Apply one of the built-in bone-map presets (Mixamo, Unreal, Rigify, ...) to this character"""

    bl_idname = "reconform.load_builtin_bone_map"
    bl_label = "Built-in Preset"
    bl_options = {'REGISTER', 'UNDO'}
    bl_property = "preset"

    preset: EnumProperty(name="Preset", items=_builtin_preset_items)

    def invoke(self, context, event):
        context.window_manager.invoke_search_popup(self)
        return {'RUNNING_MODAL'}

    def execute(self, context):
        return run(self, load_builtin, settings_of(context), BoneMapOptions(self.role, preset=self.preset))


classes = (
    RECONFORM_OT_detect_bone_map,
    RECONFORM_OT_save_bone_map,
    RECONFORM_OT_load_bone_map,
    RECONFORM_OT_load_builtin_bone_map,
)
