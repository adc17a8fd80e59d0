"""Helpers for the bridge tests: the bridge/core modules in their bl_ext namespace, small synthetic rigs built
with bpy, and snapshots of Actions."""

import importlib
import math

import numpy as np


def modules(addon):
    """(bridge, core) packages of the enabled extension (``bl_ext.<repo>.reconform``)."""
    return (importlib.import_module(addon.__name__ + ".reconform_addon.bridge"),
            importlib.import_module(addon.__name__ + ".core"))


def core_module(addon, name):
    return importlib.import_module(f"{addon.__name__}.core.{name}")


def make_rig(name="Rig", n=4, rotated=True, with_mesh=True, mesh_offset=(0.3, -0.2, 0.1)):
    """An armature with a chain of ``n`` bones (bone rolls and bends) plus an offshoot bone, its object moved,
    rotated and scaled; optionally a mesh (a vertex column along the chain) skinned by an Armature modifier.
    Returns (arm, mesh_or_None)."""
    import bpy

    arm_data = bpy.data.armatures.new(name)
    arm = bpy.data.objects.new(name, arm_data)
    bpy.context.scene.collection.objects.link(arm)
    if rotated:
        arm.location = (1.0, 2.0, 0.5)
        arm.rotation_euler = (0.2, -0.1, 0.7)
        arm.scale = (1.5, 1.5, 1.5)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    prev = None
    for i in range(n):
        eb = arm_data.edit_bones.new(f"bone.{i:02d}")
        eb.head = (0.05 * i, 0.02 * i * i, 0.4 * i)
        eb.tail = (0.05 * (i + 1), 0.02 * (i + 1) ** 2, 0.4 * (i + 1))
        eb.roll = 0.3 * i
        if prev is not None:
            eb.parent = prev
            eb.use_connect = True
        prev = eb
    side = arm_data.edit_bones.new("side")
    side.head = (0.0, 0.0, 0.8)
    side.tail = (0.3, 0.1, 0.9)
    side.parent = arm_data.edit_bones["bone.01"]
    bpy.ops.object.mode_set(mode='OBJECT')
    mesh_ob = None
    if with_mesh:
        me = bpy.data.meshes.new(name + "_mesh")
        verts, faces = [], []
        for k in range(2 * n + 1):
            z = 0.2 * k
            verts += [(-0.1, -0.1, z), (0.1, -0.1, z), (0.1, 0.1, z), (-0.1, 0.1, z)]
            if k:
                b = 4 * (k - 1)
                faces += [(b + i, b + (i + 1) % 4, b + 4 + (i + 1) % 4, b + 4 + i) for i in range(4)]
        me.from_pydata(verts, [], faces)
        mesh_ob = bpy.data.objects.new(name + "_body", me)
        bpy.context.scene.collection.objects.link(mesh_ob)
        mesh_ob.parent = arm
        mesh_ob.location = mesh_offset
        groups = [mesh_ob.vertex_groups.new(name=f"bone.{i:02d}") for i in range(n)]
        extra = mesh_ob.vertex_groups.new(name="not_a_bone")
        for v in range(len(verts)):
            z = verts[v][2]
            i = min(int(z / 0.4), n - 1)
            w = (z - 0.4 * i) / 0.4
            groups[i].add([v], 1.0 - 0.5 * w, 'REPLACE')
            if i + 1 < n:
                groups[i + 1].add([v], 0.5 * w, 'REPLACE')
            extra.add([v], 0.7, 'REPLACE')
        mod = mesh_ob.modifiers.new("Armature", 'ARMATURE')
        mod.object = arm
    bpy.context.view_layer.update()
    return arm, mesh_ob


def new_action(arm, name="Src"):
    """A new slotted Action assigned to ``arm``; returns (action, channelbag)."""
    import bpy

    act = bpy.data.actions.new(name)
    slot = act.slots.new(id_type='OBJECT', name=arm.name)
    bag = act.layers.new("Layer").strips.new(type='KEYFRAME').channelbag(slot, ensure=True)
    ad = arm.animation_data or arm.animation_data_create()
    ad.action = act
    ad.action_slot = slot
    return act, bag


def key_random_motion(arm, bag, frames=range(1, 11), seed=0, modes=None, step=1):
    """Key every bone on ``frames[::step]`` with BEZIER keys in the given rotation modes (cycled) + location."""
    rng = np.random.default_rng(seed)
    modes = modes or ['QUATERNION', 'XYZ', 'ZXY', 'AXIS_ANGLE', 'YZX']
    fr = list(frames)[::step]
    for b, pb in enumerate(arm.pose.bones):
        mode = modes[b % len(modes)]
        pb.rotation_mode = mode
        base = f'pose.bones["{pb.name}"]'
        if mode == 'QUATERNION':
            prop, vals = "rotation_quaternion", _rand_quats(rng, len(fr))
        elif mode == 'AXIS_ANGLE':
            ax = rng.normal(size=(len(fr), 3))
            vals = np.concatenate([rng.uniform(-1.5, 1.5, (len(fr), 1)), ax], 1)
            prop = "rotation_axis_angle"
        else:
            prop, vals = "rotation_euler", rng.uniform(-math.pi, math.pi, (len(fr), 3))
        locs = rng.normal(size=(len(fr), 3)) * 0.1
        for p, arr in ((prop, vals), ("location", locs)):
            for i in range(arr.shape[1]):
                fc = bag.fcurves.new(f"{base}.{p}", index=i)
                kp = fc.keyframe_points
                kp.add(len(fr))
                kp.foreach_set("co", np.stack([np.array(fr, np.float32), arr[:, i]], 1).ravel().astype(np.float32))
                fc.update()


def _rand_quats(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[:, 0] = np.abs(q[:, 0]) + 0.5
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def action_snapshot(action) -> dict:
    """Every key of every F-curve of ``action`` (all layers/strips/channelbags): {(slot, path, index): (n,6)}."""
    snap = {}
    for layer in action.layers:
        for strip in layer.strips:
            for bag in strip.channelbags:
                for fc in bag.fcurves:
                    kp = fc.keyframe_points
                    n = len(kp)
                    arrs = []
                    for prop in ("co", "handle_left", "handle_right"):
                        a = np.empty(2 * n, np.float32)
                        kp.foreach_get(prop, a)
                        arrs.append(a.reshape(n, 2))
                    snap[(bag.slot.identifier, fc.data_path, fc.array_index)] = np.concatenate(arrs, 1)
    return snap


def assert_same_snapshot(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=str(k))


def pose_matrices(arm) -> np.ndarray:
    """(J, 4, 4) Blender's evaluated ``pose.bones[j].matrix`` (armature space), one bone at a time."""
    return np.array([np.array(pb.matrix) for pb in arm.pose.bones])
