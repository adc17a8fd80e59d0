"""Every character and motion in ../shared/assets maps automatically (names), and still maps from the tree
and the rest pose alone (names removed)."""

import pytest

from .real_assets import CHARACTERS, MOTIONS, mod, read_skeleton_cached

pytestmark = pytest.mark.assets

# Core bones a rig really lacks (checked in the files): everything else in CORE_BONES must be mapped.
LACKS = {"NC_bandai": {"upper_chest"}, "cmu_salsa": {"upper_chest", "left_toes", "right_toes"}}
RIG_TYPE = {"mesh2motion": "rigify", "mh_female_average_cmurig": "cmu", "mh_female_curvy_mixamorig": "mixamo",
            "orangejuice": "metarig", "NC_bandai": "bandai", "cmu_salsa": "daz", "cmu_0": "cmu", "mh_": "unreal"}


def _expect(name, table, default=None):
    for prefix, value in table.items():
        if name.startswith(prefix):
            return value
    return default


@pytest.mark.parametrize("name", CHARACTERS + MOTIONS)
def test_every_asset_auto_maps(addon, assets, name):
    detect_bone_map = mod(addon, 'core.bonemap').detect_bone_map
    CORE_BONES = mod(addon, 'core.rig.humanoid').CORE_BONES

    sk = read_skeleton_cached(addon, assets, name)
    r = detect_bone_map(sk)
    assert r.missing_required == [], f"{name}: {r.missing_required}"
    lacks = _expect(name, LACKS, set())
    assert {c for c in CORE_BONES if c not in r.bone_map} == lacks
    assert r.rig_type == _expect(name, RIG_TYPE)
    assert len(set(r.bone_map.values())) == len(r.bone_map)
    assert sorted(r.unmapped + list(r.bone_map.values())) == sorted(sk.names)
    # the mapped chains are real chains: every mapped canonical bone descends from the mapped hips
    hips = sk.index(r.bone_map["hips"])
    for c, b in r.bone_map.items():
        j = sk.index(b)
        while j >= 0 and j != hips:
            j = int(sk.parents[j])
        assert j == hips, f"{name}: {c} -> {b} is not below the hips"


@pytest.mark.parametrize("name", [n for n in CHARACTERS + MOTIONS if not n.startswith("NC_bandai")])
def test_topology_alone_maps_the_assets(addon, assets, name):
    """Names replaced by 'bone_N': the required bones come out the same (the Bandai BVHs are excluded: their
    rest pose lies on its side, see docs/bone_mapping.md)."""
    detect_bone_map = mod(addon, 'core.bonemap').detect_bone_map
    REQUIRED_BONES = mod(addon, 'core.rig.humanoid').REQUIRED_BONES
    Skeleton = mod(addon, 'core.types').Skeleton

    sk = read_skeleton_cached(addon, assets, name)
    ref = detect_bone_map(sk).bone_map
    anon = Skeleton(sk.name, [f"bone_{j}" for j in range(sk.num_bones)], sk.parents, sk.rest_local, sk.object_matrix)
    got = {c: sk.names[int(b[5:])] for c, b in detect_bone_map(anon).bone_map.items()}
    wrong = {c: (ref[c], got.get(c)) for c in REQUIRED_BONES if ref[c] != got.get(c)}
    if name.startswith("cmu_0"):      # 'Head_end' leaf looks like the head without names (documented)
        assert wrong.pop("head", ("", "Head_end"))[1] == "Head_end"
    assert not wrong, f"{name}: {wrong}"


@pytest.mark.parametrize("preset,name", [("unreal", "mh_male_heavy.glb"), ("mixamo", "mh_female_curvy_mixamorig.glb"),
                                         ("cmu", "cmu_09_11_run.fbx"), ("daz", "cmu_salsa_61_05_follow.bvh"),
                                         ("bandai", "NC_bandai_kick_normal_001.bvh"),
                                         ("mesh2motion", "mesh2motion_mannequin_ymca.glb")])
def test_builtin_presets_fit_the_assets(addon, assets, preset, name):
    apply_bone_map = mod(addon, 'core.bonemap').apply_bone_map
    detect_bone_map = mod(addon, 'core.bonemap').detect_bone_map
    load_preset = mod(addon, 'core.bonemap').load_preset

    sk = read_skeleton_cached(addon, assets, name)
    r = apply_bone_map(sk, load_preset(preset)[0])
    assert r.missing_required == []
    assert r.bone_map == detect_bone_map(sk).bone_map
