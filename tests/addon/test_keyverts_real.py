"""Key vertices on real characters (../shared/assets) and stored on the mesh object (survive save/load)."""

import pathlib
import tempfile

import numpy as np
import pytest

from .real_assets import CHARACTERS, import_armature, mod

#: a representative subset keeps this file fast: T-pose Rigify, A-pose MakeHuman (two rigs), low-poly metarig
SUBSET = ("mesh2motion_mannequin_ymca.glb", "mh_male_heavy.glb", "mh_female_curvy_mixamorig.glb",
          "orangejuice_male_base_mesh.glb")


def _character(addon, assets, name):
    import bpy
    bpy.ops.wm.read_homefile(use_empty=True)
    arm = import_armature(addon, assets, name)
    bridge = mod(addon, "reconform_addon.bridge")
    sk = bridge.read_skeleton(arm)
    bm = mod(addon, "core.bonemap").detect_bone_map(sk).bone_map
    mesh = bridge.read_skinned_mesh(arm, sk, report=lambda msg: None)
    return arm, mod(addon, "core.types").Character(sk, mesh, dict(bm))


@pytest.mark.assets
@pytest.mark.parametrize("name", SUBSET)
def test_real_character_limbs_symmetry_and_sides(addon, assets, name):
    assert name in CHARACTERS
    kvm, hum = mod(addon, "core.keyverts"), mod(addon, "core.rig.humanoid")
    _, ch = _character(addon, assets, name)
    kv = kvm.transfer_keyverts(ch, 41)
    kv2 = kvm.transfer_keyverts(ch, 41)
    assert np.array_equal(kv.vertex_ids, kv2.vertex_ids)                          # deterministic
    tpl = kvm.load_template(41)
    pos, nrm, _ = kvm.tpose_geometry(ch)
    lab = kvm.limb_labels(ch.skeleton, ch.mesh, ch.bone_map)
    assert [hum.LIMBS[i] for i in lab[kv.vertex_ids]] == list(kv.limbs)            # on the intended limb
    H = kvm.character_height(ch)
    assert 1.2 < H < 2.2
    P = pos[kv.vertex_ids]
    idx = {x: i for i, x in enumerate(kv.names)}
    left = [i for i, x in enumerate(kv.names) if x.startswith("left_")]
    mid = np.median([(P[i, 0] + P[idx[hum.mirror_name(kv.names[i])], 0]) / 2 for i in left])
    for i in left:
        j = idx[hum.mirror_name(kv.names[i])]
        mirrored = (P[i] - [mid, 0, 0]) * [-1, 1, 1] + [mid, 0, 0]
        assert np.linalg.norm(mirrored - P[j]) < 0.03 * H, kv.names[i]            # symmetric within 3 % h
    hf = [k for k, lb in enumerate(kv.limbs) if lb.endswith(("hand", "foot"))]
    assert ((nrm[kv.vertex_ids[hf]] * tpl.directions[hf]).sum(1) > 0).all()       # palm / sole / back side


@pytest.mark.assets
def test_store_load_relock_and_save_reload(addon, assets):
    import bpy
    kvm = mod(addon, "core.keyverts")
    store_mod = mod(addon, "reconform_addon.bridge.keyverts")
    types = mod(addon, "core.types")
    arm, ch = _character(addon, assets, "orangejuice_male_base_mesh.glb")
    kv = kvm.transfer_keyverts(ch, 41)
    holder = store_mod.store(arm, ch, kv)
    items = holder.reconform_keyverts
    assert len(items) == 41 and items[0].name == kv.names[0] and items[0].limb == kv.limbs[0]
    assert tuple(items[3].co) == pytest.approx(tuple(holder.data.vertices[items[3].index].co))
    assert store_mod.holder_mesh(arm) == holder
    # hand edit: move 'left_palm' and lock it; a new transfer keeps it
    k = kv.names.index("left_palm")
    items[k].index = 7
    items[k].locked = True
    store_mod.on_edited(holder)
    loaded = store_mod.load(arm, ch)
    assert loaded.vertex_ids[k] == 7 and loaded.locked[k] and loaded.locked.sum() == 1
    again = kvm.transfer_keyverts(ch, 41, locked=loaded)
    assert again.vertex_ids[k] == 7 and np.array_equal(np.delete(again.vertex_ids, k), np.delete(kv.vertex_ids, k))
    store_mod.store(arm, ch, again)
    # save and reload the .blend: the collection comes back
    arm_name = arm.name
    path = pathlib.Path(tempfile.mkdtemp(prefix="reconform_kv_")) / "kv.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    arm2 = bpy.data.objects[arm_name]
    back = store_mod.load(arm2, ch)
    assert isinstance(back, types.KeyVertexSet)
    assert np.array_equal(back.vertex_ids, again.vertex_ids) and back.names == again.names
    assert back.locked[k] and back.locked.sum() == 1


def test_keyverts_on_a_second_mesh_object_round_trip(addon, clean_scene):
    """Items for vertices of another mesh object of the armature keep that object's name and local index."""
    import bpy
    types, store_mod = mod(addon, "core.types"), mod(addon, "reconform_addon.bridge.keyverts")
    arm = bpy.data.objects.new("Arm", bpy.data.armatures.new("Arm"))
    bpy.context.scene.collection.objects.link(arm)
    objs = []
    for name, n in (("Body", 8), ("Shirt", 5)):
        me = bpy.data.meshes.new(name)
        me.from_pydata([(i * 0.1, 0, 0) for i in range(n)], [], [])
        ob = bpy.data.objects.new(name, me)
        bpy.context.scene.collection.objects.link(ob)
        ob.modifiers.new("Armature", 'ARMATURE').object = arm
        objs.append(ob)
    part = np.array([0] * 8 + [1] * 5)
    mesh = types.SkinnedMesh("Body+Shirt", np.zeros((13, 3)), np.tile([0, 0, 1.0], (13, 1)), np.zeros(0, int),
                             np.zeros(1, int), np.zeros((13, 1), int), np.ones((13, 1)), part, ("Body", "Shirt"))
    sk = types.Skeleton("Arm", ["root"], [-1], np.eye(4)[None])
    ch = types.Character(sk, mesh, {})
    kv = types.KeyVertexSet(("a", "b", "c"), ("torso", "torso", "head"), np.array([2, 9, 4]))
    holder = store_mod.store(arm, ch, kv)
    assert holder.name == "Body" and len(objs[1].reconform_keyverts) == 0
    assert holder.reconform_keyverts[1].mesh == "Shirt" and holder.reconform_keyverts[1].index == 1
    assert tuple(holder.reconform_keyverts[1].co) == pytest.approx((0.1, 0, 0))
    back = store_mod.load(arm, ch)
    assert np.array_equal(back.vertex_ids, [2, 9, 4])
