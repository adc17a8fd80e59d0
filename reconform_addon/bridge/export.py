"""Export retargeted characters with Blender's own exporters (FBX, glTF/GLB, BVH), so that other tools read
exactly the retargeted clip: one clip per character, named as its Action, over the frames retargeted, at the
scene's (the source's) frame rate, bone channels only.

``prepare_scene`` readies the scene once, after the result .blend is written (it changes the scene): each
exported armature keeps its new Action as its only animation (its NLA tracks, the other F-curves of that Action
and the animation of its meshes' shape keys are dropped). ``export`` then runs one exporter with the options of
``FBX_COMMON`` + ``FBX_PRESETS[preset]``, ``GLTF_OPTIONS`` or ``BVH_OPTIONS`` (docs/bridge.md "Exports").
``remove_root_motion`` keeps a clip in place (the root's horizontal travel removed).
"""

from __future__ import annotations

import os

import bpy
from mathutils import Vector

from .errors import BridgeError
from .read import find_meshes

FORMATS = (".fbx", ".glb", ".gltf", ".bvh")

#: FBX options used by every preset: a baked take of the scene's range (not every Action of the file, not the
#: NLA strips), every bone keyed on every frame (bake_anim_use_all_bones: the simplification leaves bones
#: alone and drops the constant channels of the objects), no leaf bones, Blender's bone axes
FBX_COMMON = dict(
    bake_anim=True, bake_anim_use_all_actions=False, bake_anim_use_nla_strips=False, bake_anim_use_all_bones=True,
    bake_anim_force_startend_keying=True, bake_anim_step=1.0, bake_anim_simplify_factor=1.0,
    add_leaf_bones=False, primary_bone_axis='Y', secondary_bone_axis='X', armature_nodetype='NULL',
    object_types={'ARMATURE', 'MESH'}, use_armature_deform_only=False, bake_space_transform=False,
    global_scale=1.0, apply_unit_scale=True,
)
#: axes and units per target application (upright, unit scale on the objects: docs/bridge.md "Exports")
FBX_PRESETS = {
    # Blender's defaults: Y up, metres written as FBX's centimetres through the file's UnitScaleFactor (100)
    "blender": dict(axis_forward='-Z', axis_up='Y', apply_scale_options='FBX_SCALE_NONE'),
    # Unity: Y up, -Z forward; the unit scale applied to the data ("All Local"): objects at scale 1, cm in file
    "unity": dict(axis_forward='-Z', axis_up='Y', apply_scale_options='FBX_SCALE_ALL'),
    # Unreal: Z up as Blender (Epic's Send to Unreal axes), centimetres in the data, objects at scale 1
    "unreal": dict(axis_forward='Y', axis_up='Z', apply_scale_options='FBX_SCALE_ALL'),
}
#: glTF options: each animated armature's active Action as one animation named after it (not every Action the
#: armature could play: export_anim_single_armature off), sampled on every frame of the scene's range, bones
#: only (no shape-key animation)
GLTF_OPTIONS = dict(
    export_animations=True, export_animation_mode='ACTIONS', export_anim_single_armature=False,
    export_merge_animation='ACTION', export_frame_range=True, export_force_sampling=True, export_frame_step=1,
    export_anim_slide_to_zero=False, export_optimize_animation_size=False, export_morph_animation=False,
    export_current_frame=False, export_leaf_bone=False, export_def_bones=False, export_yup=True,
)
#: BVH options: every joint with its offset and rotation channels (a file holds one armature, no clip name)
BVH_OPTIONS = dict(global_scale=1.0, rotate_mode='NATIVE', root_transform_only=False)


def _action_slot_bag(arm):
    """(Action, its channelbag for the armature's slot) of ``arm``'s active Action, or (None, None)."""
    ad = arm.animation_data
    act = ad.action if ad else None
    if act is None:
        return None, None
    from bpy_extras import anim_utils
    slot = getattr(ad, "action_slot", None) or (act.slots[0] if len(act.slots) else None)
    return act, anim_utils.action_get_channelbag_for_slot(act, slot)


def prepare_scene(arms) -> list:
    """Ready the scene to export the armatures ``arms`` (it changes the scene: call it after the .blend is
    written). Each keeps its active Action, with only its pose-bone F-curves, and no NLA tracks; the shape keys
    of its meshes lose their animation. Returns the Actions' names (one per armature)."""
    names = []
    for arm in arms:
        act, bag = _action_slot_bag(arm)
        if act is None:
            raise BridgeError(f"Armature '{arm.name}' has no Action to export.")
        ad = arm.animation_data
        for track in list(ad.nla_tracks):
            ad.nla_tracks.remove(track)
        for fc in [fc for fc in bag.fcurves if not fc.data_path.startswith("pose.bones[")]:
            bag.fcurves.remove(fc)
        for ob in find_meshes(arm):
            keys = getattr(ob.data, "shape_keys", None)
            for owner in (ob, keys):
                if owner is not None and owner.animation_data is not None:
                    owner.animation_data_clear()
        names.append(act.name)
    return names


def _select(arms):
    objs = list(arms) + [m for arm in arms for m in find_meshes(arm)]
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objs:
        if ob.name in bpy.context.view_layer.objects:
            ob.select_set(True)
    bpy.context.view_layer.objects.active = arms[0]


def export(path, arms, frame_range, take_name: str, fbx_preset: str = "blender") -> None:
    """Write ``arms`` (and the meshes they move) with their active Actions over ``frame_range`` (inclusive) to
    ``path`` (.fbx, .glb, .gltf or .bvh, by its extension). ``take_name``: the FBX take's name (a glTF
    animation is named after its Action; a BVH file has no clip name). Raises BridgeError when the exporter
    fails or writes nothing."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise BridgeError(f"Cannot export '{path}': use one of {', '.join(FORMATS)}.")
    if ext == ".bvh" and len(arms) != 1:
        raise BridgeError(f"Cannot export '{path}': a BVH file holds one armature; put {{target}} in the path to "
                          "write one file per character.")
    if ext == ".fbx" and fbx_preset not in FBX_PRESETS:
        raise BridgeError(f"Unknown FBX preset '{fbx_preset}': use one of {', '.join(FBX_PRESETS)}.")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frame_range
    _select(arms)
    scene_name = scene.name
    try:
        if ext == ".fbx":   # the take of the scene's range is named after the scene
            scene.name = take_name
            res = bpy.ops.export_scene.fbx(filepath=path, use_selection=True, **FBX_COMMON,
                                           **FBX_PRESETS[fbx_preset])
        elif ext in (".glb", ".gltf"):
            res = bpy.ops.export_scene.gltf(filepath=path, use_selection=True,
                                             export_format='GLB' if ext == ".glb" else 'GLTF_SEPARATE',
                                             **GLTF_OPTIONS)
        else:
            res = bpy.ops.export_anim.bvh(filepath=path, frame_start=frame_range[0], frame_end=frame_range[1],
                                          **BVH_OPTIONS)
    except RuntimeError as ex:
        raise BridgeError(f"Export to '{path}' failed: {str(ex).strip().splitlines()[-1]}") from None
    finally:
        scene.name = scene_name
    if 'FINISHED' not in res or not os.path.isfile(path) or not os.path.getsize(path):
        raise BridgeError(f"Export to '{path}' failed: the exporter wrote nothing.")


def root_bone(arm, frame_range):
    """The pose bone carrying the clip's travel: the bone nearest the hierarchy's root whose location keys move
    it over ``frame_range`` (a rig's unanimated 'Root' is skipped), or None."""
    act, bag = _action_slot_bag(arm)
    if act is None:
        return None
    moving = set()
    for fc in bag.fcurves:
        if fc.data_path.endswith("].location") and fc.data_path.startswith("pose.bones["):
            values = [fc.evaluate(f) for f in range(frame_range[0], frame_range[1] + 1)]
            if max(values) - min(values) > 1e-6:
                moving.add(fc.data_path[len('pose.bones["'):-len('"].location')])
    candidates = [pb for pb in arm.pose.bones if pb.name in moving]
    return min(candidates, key=lambda pb: len(pb.parent_recursive)) if candidates else None


def remove_root_motion(arm, frame_range) -> str | None:
    """Keep ``arm``'s clip in place: the root bone's (``root_bone``) horizontal travel in the world (x, y)
    relative to the first frame is taken out of its location keys on every frame of ``frame_range``; its
    height, and every other bone, are untouched. Returns the bone's name (None when no bone travels)."""
    pb = root_bone(arm, frame_range)
    if pb is None:
        return None
    act, bag = _action_slot_bag(arm)
    path = f'pose.bones["{pb.name}"].location'
    curves = {fc.array_index: fc for fc in bag.fcurves if fc.data_path == path}
    scene = bpy.context.scene
    frame = scene.frame_current
    first, new = None, {}
    for f in range(frame_range[0], frame_range[1] + 1):
        scene.frame_set(f)
        head = arm.matrix_world @ pb.matrix.translation
        first = head.copy() if first is None else first
        travel = Vector((head.x - first.x, head.y - first.y, 0.0))
        # pose location acts through the world matrix of the bone with no pose of its own: W @ P (linear in it)
        frame_of_basis = (arm.matrix_world @ pb.matrix @ pb.matrix_basis.inverted()).to_3x3()
        loc = Vector(tuple(curves[i].evaluate(f) if i in curves else pb.location[i] for i in range(3)))
        new[f] = loc - frame_of_basis.inverted() @ travel
    scene.frame_set(frame)
    for i in range(3):
        fc = curves.get(i) or bag.fcurves.new(path, index=i, group_name=pb.name)
        for f, loc in new.items():
            fc.keyframe_points.insert(f, loc[i], options={'FAST', 'REPLACE'})
        fc.update()
    return pb.name


__all__ = ["BVH_OPTIONS", "FBX_COMMON", "FBX_PRESETS", "FORMATS", "GLTF_OPTIONS", "export", "prepare_scene",
           "remove_root_motion", "root_bone"]
