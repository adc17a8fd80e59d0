"""Bridge reading on synthetic rigs built with bpy: skeleton, meshes, skin weights, motion (fast and sampled)."""

import numpy as np
import pytest

from tests.addon.bridge_helpers import (core_module, key_random_motion, make_rig, modules, new_action,
                                        pose_matrices)

bpy = pytest.importorskip("bpy")


@pytest.fixture
def br(addon, clean_scene):
    return modules(addon)[0]


@pytest.fixture
def fk(addon):
    kin = core_module(addon, "rig.kinematics")

    def run(skel, motion):
        p = kin.forward_kinematics(skel, motion.rotations, motion.locations)
        return p.rotations.numpy(), p.positions.numpy()
    return run


def test_rest_matrices_equal_bone_matrix_local(br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    assert sk.names == tuple(b.name for b in arm.data.bones)
    assert sk.parents.tolist() == [-1, 0, 1, 2, 1]
    expected = np.array([np.array(b.matrix_local) for b in arm.data.bones])
    np.testing.assert_allclose(sk.rest_global, expected, atol=1e-6)
    np.testing.assert_allclose(sk.object_matrix, np.array(arm.matrix_world), atol=1e-12)
    # rest_local is relative to the parent's rest matrix
    np.testing.assert_allclose(sk.rest_local[3], np.linalg.inv(expected[2]) @ expected[3], atol=1e-6)


def test_read_skeleton_rejects_non_armature(br):
    _, mesh = make_rig()
    with pytest.raises(br.BridgeError, match="Rig_body.*not an armature"):
        br.read_skeleton(mesh)


def test_find_meshes_by_modifier_and_parenting(br):
    arm, body = make_rig()
    other = bpy.data.objects.new("unrelated", bpy.data.meshes.new("u"))
    bpy.context.scene.collection.objects.link(other)
    prop = bpy.data.objects.new("hat", bpy.data.meshes.new("hat"))
    bpy.context.scene.collection.objects.link(prop)
    prop.parent, prop.parent_type, prop.parent_bone = arm, 'BONE', "bone.03"
    rigid = bpy.data.objects.new("rigid", bpy.data.meshes.new("rigid"))  # object-parented, no groups
    bpy.context.scene.collection.objects.link(rigid)
    rigid.parent = arm
    body.hide_viewport = True  # hidden meshes still count
    assert [o.name for o in br.find_meshes(arm)] == ["Rig_body", "hat"]


def test_find_meshes_keeps_to_the_armatures_scene(br):
    """A mesh the same armature deforms in another scene of the file (a proxy, another shot's variant) is not part
    of the character in this one; from a scene without the armature, the armature's own scenes are read."""
    arm, body = make_rig()
    here = bpy.context.scene
    other = bpy.data.scenes.new("OtherShot")
    proxy = bpy.data.objects.new("Rig_proxy", bpy.data.meshes.new("proxy"))
    other.collection.objects.link(proxy)
    proxy.modifiers.new("Armature", 'ARMATURE').object = arm
    assert [o.name for o in br.find_meshes(arm)] == ["Rig_body"]
    other.collection.objects.link(arm)                  # the armature in both scenes, this one current
    assert [o.name for o in br.find_meshes(arm)] == ["Rig_body"]
    here.collection.objects.unlink(arm)                 # now only in the other scene: its meshes there
    here.collection.objects.unlink(body)
    other.collection.objects.link(body)
    assert [o.name for o in br.find_meshes(arm)] == ["Rig_body", "Rig_proxy"]


def test_skinned_mesh_in_armature_space_at_rest(br):
    arm, body = make_rig()
    sk = br.read_skeleton(arm)
    # pose the armature: the reader must still return the rest pose and restore the pose afterwards
    arm.pose.bones["bone.01"].rotation_quaternion = (0.8, 0.6, 0.0, 0.0)
    bpy.context.view_layer.update()
    posed_before = pose_matrices(arm)
    notes = []
    m = br.read_skinned_mesh(arm, sk, report=notes.append)
    co = np.array([tuple(v.co) for v in body.data.vertices])
    to_arm = np.linalg.inv(np.array(arm.matrix_world)) @ np.array(body.matrix_world)
    np.testing.assert_allclose(m.rest_verts, co @ to_arm[:3, :3].T + to_arm[:3, 3], atol=1e-5)
    assert arm.data.pose_position == 'POSE'
    np.testing.assert_allclose(pose_matrices(arm), posed_before, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(m.rest_normals, axis=1), 1.0, atol=1e-6)
    assert m.face_offsets[-1] == len(m.face_indices) == 4 * len(body.data.polygons)
    assert m.triangles().shape == (2 * len(body.data.polygons), 3)
    # weights: only bone groups ('not_a_bone' dropped), renormalised, K = 4 (the minimum)
    assert m.weight_bones.shape == (len(co), 4)
    np.testing.assert_allclose(m.weight_values.sum(1), 1.0, atol=1e-9)
    v = 5  # z = 0.2: bone.00 with 0.75, bone.01 with 0.25 before normalisation
    g = {sk.names[b]: w for b, w in zip(m.weight_bones[v], m.weight_values[v]) if w > 0}
    assert g == pytest.approx({"bone.00": 0.75 / 1.0, "bone.01": 0.25})
    assert not notes


def test_skinned_mesh_bone_parented_and_unweighted(br):
    arm, body = make_rig()
    sk = br.read_skeleton(arm)
    me = bpy.data.meshes.new("hat")
    me.from_pydata([(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0)], [], [(0, 1, 2)])
    hat = bpy.data.objects.new("hat", me)
    bpy.context.scene.collection.objects.link(hat)
    hat.parent, hat.parent_type, hat.parent_bone = arm, 'BONE', "bone.03"
    body.vertex_groups["bone.00"].remove([0, 1])  # two vertices lose their only deforming weight
    body.vertex_groups["bone.00"].remove([2])
    notes = []
    m = br.read_skinned_mesh(arm, sk, report=notes.append)
    assert m.part_names == ("Rig_body", "hat")
    hat_rows = m.part == 1
    assert hat_rows.sum() == 3
    assert (m.weight_bones[hat_rows, 0] == sk.index("bone.03")).all()
    np.testing.assert_allclose(m.weight_values[hat_rows, 0], 1.0)
    # faces of the second part index into the merged vertex array
    assert m.face_indices[-3:].tolist() == [len(body.data.vertices) + i for i in range(3)]
    hat_world = np.array(hat.matrix_world)
    expect = (np.linalg.inv(np.array(arm.matrix_world)) @ hat_world @ np.array([0.1, 0, 0, 1]))[:3]
    np.testing.assert_allclose(m.rest_verts[len(body.data.vertices) + 1], expect, atol=1e-5)
    assert m.weight_values[:3].sum() == 0 and len(notes) == 1 and "3 of" in notes[0] and "Rig_body" in notes[0]


def test_no_mesh_error_names_armature(br):
    arm, _ = make_rig(with_mesh=False)
    sk = br.read_skeleton(arm)
    with pytest.raises(br.BridgeError, match="Armature 'Rig' deforms no mesh: add an Armature modifier"):
        br.read_skinned_mesh(arm, sk)


def test_many_influences_keep_top_k(br):
    arm, body = make_rig(n=10)
    sk = br.read_skeleton(arm)
    rng = np.random.default_rng(3)
    W = rng.uniform(0.01, 1.0, size=(len(body.data.vertices), 10))
    for i in range(10):
        g = body.vertex_groups[f"bone.{i:02d}"]
        for v in range(len(W)):
            g.add([v], float(W[v, i]), 'REPLACE')
    m = br.read_skinned_mesh(arm, sk)
    assert m.weight_bones.shape[1] == 8  # capped at MAX_INFLUENCES
    top = np.sort(W, axis=1)[:, ::-1][:, :8]
    np.testing.assert_allclose(m.weight_values, top / top.sum(1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("modes", [['QUATERNION'], ['XYZ', 'ZXY', 'YZX', 'ZYX'], ['AXIS_ANGLE']])
def test_read_motion_fcurves_match_blender_pose(br, fk, modes):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    act, bag = new_action(arm)
    key_random_motion(arm, bag, frames=range(3, 16), modes=modes, step=2)  # keys every 2nd frame: evaluate path
    m = br.read_motion(arm, sk)
    assert (m.frame_start, m.num_frames) == (3, 13)
    sc = bpy.context.scene
    assert m.fps == pytest.approx(sc.render.fps / sc.render.fps_base)
    rot, pos = fk(sk, m)
    for t in (0, 1, 6, 12):
        sc.frame_set(3 + t)
        G = pose_matrices(arm)
        np.testing.assert_allclose(pos[t], G[:, :3, 3], atol=1e-5)
        np.testing.assert_allclose(rot[t], G[:, :3, :3], atol=1e-5)


def test_read_motion_sampled_equals_fcurves(br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    act, bag = new_action(arm)
    key_random_motion(arm, bag, frames=range(1, 9))
    a = br.read_motion(arm, sk, frame_start=2, frame_end=7)
    bpy.context.scene.frame_set(5)
    b = br.read_motion(arm, sk, frame_start=2, frame_end=7, sample=True)
    assert bpy.context.scene.frame_current == 5  # restored
    np.testing.assert_allclose(np.abs((a.rotations * b.rotations).sum(-1)), 1.0, atol=1e-6)
    np.testing.assert_allclose(a.locations, b.locations, atol=1e-5)


def test_constraint_forces_sampled_path(br, fk):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    act, bag = new_action(arm)
    key_random_motion(arm, bag, frames=range(1, 9), modes=['XYZ'])
    raw = br.read_motion(arm, sk)
    c = arm.pose.bones["bone.02"].constraints.new('LIMIT_ROTATION')
    c.use_limit_x = c.use_limit_y = c.use_limit_z = True  # all limits 0: bone.02 frozen at rest rotation
    c.owner_space = 'LOCAL'
    m = br.read_motion(arm, sk)
    rot, pos = fk(sk, m)
    sc = bpy.context.scene
    for t in (0, 4, 7):
        sc.frame_set(1 + t)
        G = pose_matrices(arm)
        np.testing.assert_allclose(pos[t], G[:, :3, 3], atol=1e-5)
        np.testing.assert_allclose(rot[t], G[:, :3, :3], atol=1e-5)
    j = sk.index("bone.02")
    np.testing.assert_allclose(np.abs(m.rotations[:, j, 0]), 1.0, atol=1e-6)  # the constraint's effect
    assert np.abs(raw.rotations[:, j, 0]).min() < 0.99  # ... which the F-curves alone do not have


def test_driver_and_nla_force_sampled_path(br, fk):
    from importlib import import_module
    read = import_module(br.__name__ + ".animation")
    arm, _ = make_rig()
    act, bag = new_action(arm)
    key_random_motion(arm, bag, frames=range(1, 5))
    assert read._needs_sampling(arm) == ""
    other, bag2 = new_action(arm, "Other")
    key_random_motion(arm, bag2, frames=range(1, 5), seed=4)
    ad = arm.animation_data
    ad.action = act
    ad.action_slot = act.slots[0]
    track = ad.nla_tracks.new()
    track.strips.new("o", 1, other)
    assert "NLA track" in read._needs_sampling(arm)
    ad.nla_tracks.remove(track)
    fc = arm.pose.bones["side"].driver_add("location", 0)
    fc.driver.expression = "0.25"
    assert "driver" in read._needs_sampling(arm)
    sk = br.read_skeleton(arm)
    m = br.read_motion(arm, sk)
    np.testing.assert_allclose(m.locations[:, sk.index("side"), 0], 0.25, atol=1e-6)


def test_read_explicit_action_keeps_assignment(br):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)
    a1, bag1 = new_action(arm, "A1")
    key_random_motion(arm, bag1, frames=range(1, 6))
    a2, bag2 = new_action(arm, "A2")
    key_random_motion(arm, bag2, frames=range(1, 21), seed=9)
    arm.animation_data.action = a1
    arm.animation_data.action_slot = a1.slots[0]
    m2 = br.read_motion(arm, sk, action=a2)
    assert m2.num_frames == 20
    assert arm.animation_data.action == a1
    fcs = {(fc.data_path, fc.array_index): fc for fc in bag2.fcurves}
    pb = arm.pose.bones["bone.00"]
    assert pb.rotation_mode == 'QUATERNION'
    w = fcs[('pose.bones["bone.00"].rotation_quaternion', 0)].evaluate(7)
    q = np.array([fcs[('pose.bones["bone.00"].rotation_quaternion', i)].evaluate(7) for i in range(4)])
    assert m2.rotations[6, 0, 0] == pytest.approx(w / np.linalg.norm(q), abs=1e-6)
    # sampled read of the non-active action also restores the assignment
    br.read_motion(arm, sk, action=a2, sample=True, frame_end=4)
    assert arm.animation_data.action == a1 and arm.animation_data.action_slot == a1.slots[0]


def test_read_motion_without_animation_errors(br):
    arm, _ = make_rig()
    with pytest.raises(br.BridgeError, match="Armature 'Rig' has no animation"):
        br.read_motion(arm, br.read_skeleton(arm))


def test_object_animation_is_folded_into_the_root(br, fk):
    arm, _ = make_rig()
    sk = br.read_skeleton(arm)  # object_matrix at the current (static) placement
    act, bag = new_action(arm)
    key_random_motion(arm, bag, frames=range(1, 7), modes=['QUATERNION'])
    for i, vals in enumerate(([1.0, 1.5], [2.0, 2.0], [0.5, 0.9])):  # the object itself moves and turns
        fc = bag.fcurves.new("location", index=i)
        fc.keyframe_points.add(2)
        fc.keyframe_points.foreach_set("co", [1, vals[0], 6, vals[1]])
        fc.update()
    fc = bag.fcurves.new("rotation_euler", index=2)
    fc.keyframe_points.add(2)
    fc.keyframe_points.foreach_set("co", [1, 0.7, 6, 1.4])
    fc.update()
    from importlib import import_module
    assert import_module(br.__name__ + ".animation").object_animated(arm, act)
    m = br.read_motion(arm, sk)
    rot, pos = fk(sk, m)
    M0 = sk.object_matrix
    for t in (0, 3, 5):
        bpy.context.scene.frame_set(1 + t)
        W = np.array(arm.matrix_world) @ pose_matrices(arm)  # Blender's world-space bones
        np.testing.assert_allclose(pos[t] @ M0[:3, :3].T + M0[:3, 3], W[:, :3, 3], atol=1e-5)


@pytest.mark.parametrize("order", ('XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX'))
def test_numpy_rotation_twins_match_mathutils(addon, order):
    """The bridge reads Euler and axis-angle channels with core.rig.rotations_np: each of Blender's Euler orders
    (and axis-angle, and matrix -> quaternion) agrees with mathutils."""
    from mathutils import Euler, Matrix, Quaternion, Vector

    rn = core_module(addon, "rig.rotations_np")
    assert order in rn.EULER_ORDERS
    rng = np.random.default_rng("XYZ XZY YXZ YZX ZXY ZYX".split().index(order))
    angles = rng.uniform(-np.pi, np.pi, size=(25, 3))
    q = rn.euler_to_quat(angles, order)
    for e, qi in zip(angles, q):
        ref = np.array(Euler(tuple(e), order).to_quaternion())
        # the same rotation (either sign), to mathutils' float32 precision
        assert abs(abs(float(np.dot(qi, ref))) - 1.0) < 1e-6, (e, qi, ref)
        np.testing.assert_allclose(rn.quat_to_matrix(qi), np.array(Euler(tuple(e), order).to_matrix()), atol=1e-6)
    for aa in rng.normal(size=(10, 4)):
        ref = np.array(Quaternion(Vector(aa[1:]).normalized(), aa[0]))
        assert abs(abs(float(np.dot(rn.axis_angle_to_quat(aa), ref))) - 1.0) < 1e-6
    for qi in q[:10]:
        ref = np.array(Matrix(rn.quat_to_matrix(qi).tolist()).to_quaternion())
        assert abs(abs(float(np.dot(rn.matrix_to_quat(rn.quat_to_matrix(qi)), ref))) - 1.0) < 1e-6
