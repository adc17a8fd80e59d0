"""core.bonemap: detection by names (every supported naming scheme) and by topology; presets."""

import json

import numpy as np
import pytest

from core.bonemap import (analyse_name, apply_bone_map, detect_bone_map, list_presets, load_bone_map, load_preset,
                          save_bone_map)
from core.errors import CoreError
from core.rig.humanoid import CORE_BONES, REQUIRED_BONES
from core.types import Skeleton

from .rigs import NAMING, bone_name, make_skeleton, object_matrix

RIG_TYPES = {"mixamo": "mixamo", "unreal": "unreal", "rigify": "rigify", "metarig": "metarig", "cmu": "cmu",
             "vrm": "vrm", "cc": "character_creator", "daz": "daz", "bandai": "bandai", "generic": "generic"}


def expected_core(style):
    return {k: bone_name(style, k) for k in CORE_BONES if bone_name(style, k)}


@pytest.mark.parametrize("style", sorted(NAMING))
@pytest.mark.parametrize("arm_angle,roll_seed,extra_root", [(0, None, False), (45, 7, True)])
def test_every_naming_scheme_maps_its_core_bones(style, arm_angle, roll_seed, extra_root):
    sk = make_skeleton(style, arm_angle=arm_angle, roll_seed=roll_seed, extra_root=extra_root)
    r = detect_bone_map(sk)
    assert r.missing_required == []
    assert r.rig_type == RIG_TYPES[style]
    assert {k: v for k, v in r.bone_map.items() if k in CORE_BONES} == expected_core(style)
    assert set(r.unmapped) == set(sk.names) - set(r.bone_map.values())


def test_mixamo_namespace_variants_and_fingers():
    sk = make_skeleton("mixamo")
    renamed = Skeleton("m1", [n.replace("mixamorig:", "mixamorig1:") for n in sk.names], sk.parents,
                       sk.rest_local, sk.object_matrix)
    r = detect_bone_map(renamed)
    assert r.bone_map["left_upper_arm"] == "mixamorig1:LeftArm"
    assert r.bone_map["left_middle_1"] == "mixamorig1:LeftHandMiddle1"
    assert r.bone_map["right_thumb_2"] == "mixamorig1:RightHandThumb2"
    assert "mixamorig1:HeadTop_End" in r.unmapped and "mixamorig1:HeadTop_End" not in r.bone_map.values()


@pytest.mark.parametrize("style", ["unreal", "mixamo", "daz", "vrm"])
@pytest.mark.parametrize("arm_angle", [0, 45])
def test_topology_maps_meaningless_names(style, arm_angle):
    """Names carry no information: hips, spine chain, limbs and sides come from the tree and the rest pose."""
    sk = make_skeleton(style, arm_angle=arm_angle, roll_seed=3)
    anon = Skeleton("anon", [f"bone{j:02d}" for j in range(sk.num_bones)], sk.parents, sk.rest_local,
                    sk.object_matrix)
    r = detect_bone_map(anon)
    assert r.missing_required == []
    got = {k: sk.names[int(v[4:])] for k, v in r.bone_map.items() if k in CORE_BONES}
    exp = expected_core(style)
    wrong = {k: (exp.get(k), got.get(k)) for k in REQUIRED_BONES if exp.get(k) != got.get(k)}
    if bone_name(style, "head_end"):
        # without names a head-top end bone looks like the head (no bone lengths in a Skeleton): documented
        assert wrong.pop("head", (0, bone_name(style, "head_end")))[1] == bone_name(style, "head_end")
    assert not wrong


def test_topology_uses_world_space_and_facing():
    """A character turned to face +X inside a rotated, cm-scaled object still maps left as left."""
    sk = make_skeleton("unreal", object_matrix=object_matrix(0.01, z_deg=90), turn_world=True)
    anon = Skeleton("anon", [f"b{j}" for j in range(sk.num_bones)], sk.parents, sk.rest_local, sk.object_matrix)
    r = detect_bone_map(anon)
    assert sk.names[int(r.bone_map["left_hand"][1:])] == "hand_l"
    assert sk.names[int(r.bone_map["right_foot"][1:])] == "foot_r"


def test_names_win_over_side_geometry_and_helpers_are_ignored():
    sk = make_skeleton("unreal")
    names = list(sk.names)
    # add IK / twist helpers under the hands and root: never mapped
    parents = list(sk.parents)
    rest = list(sk.rest_local)
    for helper, parent in (("ik_hand_l", "hand_l"), ("upperarm_twist_01_l", "upperarm_l"), ("foot_l_end", "foot_l")):
        names.append(helper)
        parents.append(names.index(parent))
        rest.append(np.eye(4))
    r = detect_bone_map(Skeleton("ue", names, parents, np.stack(rest), sk.object_matrix))
    assert set(r.bone_map.values()).isdisjoint({"ik_hand_l", "upperarm_twist_01_l", "foot_l_end"})
    assert r.bone_map["left_hand"] == "hand_l"


def test_incomplete_rig_reports_missing_without_raising():
    sk = make_skeleton("unreal")
    keep = [j for j, n in enumerate(sk.names) if not n.endswith("_r")]
    idx = {j: k for k, j in enumerate(keep)}
    one_sided = Skeleton("half", [sk.names[j] for j in keep], [idx.get(int(sk.parents[j]), -1) for j in keep],
                         sk.rest_local[keep], sk.object_matrix)
    r = detect_bone_map(one_sided)
    assert "right_hand" in r.missing_required and "right_foot" in r.missing_required
    assert len(r.unmapped) + len(r.bone_map) == one_sided.num_bones


@pytest.mark.parametrize("name,side,part", [
    ("mixamorig:LeftUpLeg", "left", "upper_leg"), ("mixamorig12:RightForeArm", "right", "lower_arm"),
    ("DEF-upper_arm.L", "left", "upper_arm"), ("ORG-shin.R", "right", "lower_leg"), ("lShldr", "left", "upper_arm"),
    ("rCollar", "right", "shoulder"), ("LHipJoint", "left", "hip_joint"), ("J_Bip_C_Hips", "", "hips"),
    ("CC_Base_L_Upperarm", "left", "upper_arm"), ("ball_r", "right", "toes"), ("Bip01 L Thigh", "left", "upper_leg"),
    ("upperleg01.L", "left", "upper_leg"), ("wrist.R", "right", "hand"), ("Toes_L", "left", "toes"),
])
def test_name_analysis(name, side, part):
    info = analyse_name(name)
    assert (info.side, info.part) == (side, part)


def test_name_analysis_flags_helpers_and_fingers():
    assert analyse_name("MCH-thigh_ik.L").helper
    assert analyse_name("mixamorig:HeadTop_End").helper
    assert analyse_name("index_metacarpal_l").helper
    assert analyse_name("mixamorig:LeftHandPinky2").finger == "little"
    assert analyse_name("finger2-1.L").finger == "index"
    assert analyse_name("DEF-f_middle.01.R").finger == "middle"


def test_save_load_roundtrip(tmp_path):
    bm = detect_bone_map(make_skeleton("mixamo")).bone_map
    p = tmp_path / "sub" / "rig.json"
    save_bone_map(p, bm, "mixamo")
    got, rig = load_bone_map(p)
    assert got == bm and rig == "mixamo"
    data = json.loads(p.read_text())
    assert data["schema"] == "reconform.bone_map" and data["version"] == 1


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON"),
    ('{"schema": "other"}', "not a bone-map preset"),
    ('{"schema": "reconform.bone_map", "version": 99, "bone_map": {}}', "version 99"),
    ('{"schema": "reconform.bone_map", "version": 1}', "no \\\"bone_map\\\""),
    ('{"schema": "reconform.bone_map", "version": 1, "bone_map": {"elbow": "x"}}', "'elbow' is not a canonical"),
    ('{"schema": "reconform.bone_map", "version": 1, "bone_map": {"hips": "a", "spine": "a"}}', "mapped twice"),
    ('{"schema": "reconform.bone_map", "version": 1, "bone_map": {"hips": 3}}', "non-empty string"),
])
def test_load_rejects_bad_presets_with_a_clear_message(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(CoreError) as ex:
        load_bone_map(p)
    assert message.replace("\\", "") in str(ex.value)
    assert "bad.json" in str(ex.value)


def test_load_missing_file(tmp_path):
    with pytest.raises(CoreError, match="cannot be read"):
        load_bone_map(tmp_path / "nope.json")


def test_builtin_presets_load_and_apply():
    names = list_presets()
    for want in ("mixamo", "unreal", "rigify", "metarig", "cmu", "vrm", "character_creator", "daz", "bandai"):
        assert want in names
    for name in names:
        bm, _ = load_preset(name)
        assert set(REQUIRED_BONES) <= set(bm), name
    # a preset fits a rig with another namespace, and drops bones the rig lacks
    sk = make_skeleton("mixamo")
    sk1 = Skeleton("m1", [n.replace("mixamorig:", "mixamorig1:") for n in sk.names], sk.parents, sk.rest_local)
    bm, _ = load_preset("mixamo")
    r = apply_bone_map(sk1, bm)
    assert r.missing_required == [] and r.bone_map["hips"] == "mixamorig1:Hips"
    assert all(v in sk1.names for v in r.bone_map.values())
    with pytest.raises(CoreError, match="No built-in bone-map preset"):
        load_preset("nonexistent_rig")
