"""core.character.meshparts: which mesh objects form a character's body (issue 15, items 7 and 9). A sword in a hand, a shirt
over the torso and eyes in the head are left out; a robot's separate rigid parts are all its body; the user's
choice wins; key vertices and h_c then come from the body only."""

import numpy as np
import pytest

from core.body import BodyParams, make_body
from core.character.complete import CharacterSpec, build_character
from core.errors import CoreError
from core.rig.humanoid import CHAIN_CHILD, CORE_BONES, LIMBS
from core.character.meshparts import choose_body, classify_parts, remap_keyverts, submesh
from core.rig.parts import limb_labels
from core.types import KeyVertexSet, SkinnedMesh
from tools.zoo import rounded_box


def merge(name, parts):
    """One SkinnedMesh from [(part name, verts (V, 3), polygons, weight bones (V, K), weight values (V, K))]."""
    verts, faces, offsets, wb, wv, part = [], [], [0], [], [], []
    base = 0
    for p, (_, v, polys, b, w) in enumerate(parts):
        verts.append(np.asarray(v, float))
        for f in polys:
            faces.extend(int(i) + base for i in f)
            offsets.append(len(faces))
        wb.append(np.asarray(b, np.int64))
        wv.append(np.asarray(w, float))
        part.append(np.full(len(v), p))
        base += len(v)
    V = np.concatenate(verts)
    K = max(x.shape[1] for x in wb)
    wb = np.concatenate([np.pad(x, ((0, 0), (0, K - x.shape[1]))) for x in wb])
    wv = np.concatenate([np.pad(x, ((0, 0), (0, K - x.shape[1]))) for x in wv])
    fo = np.asarray(offsets, np.int64)
    fi = np.asarray(faces, np.int64)
    normals = np.zeros_like(V)
    for s, e in zip(fo[:-1], fo[1:]):            # area-weighted polygon normals (outward for these meshes)
        f = fi[s:e]
        n = np.cross(V[f[1]] - V[f[0]], V[f[2]] - V[f[0]])
        normals[f] += n
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    return SkinnedMesh(name, V, normals, fi, fo, wb, wv, np.concatenate(part), tuple(p[0] for p in parts))


def rigid(v, bone):
    return np.full((len(v), 1), bone), np.ones((len(v), 1))


@pytest.fixture(scope="module")
def body():
    sk, mesh, bone_map = make_body(BodyParams(name="dressed", resolution=0.03), pose="T")
    return sk, mesh, bone_map


def dressed_parts(sk, mesh, bone_map):
    polys = mesh.face_indices.reshape(-1, 4)
    parts = [("Body", mesh.rest_verts, polys, mesh.weight_bones, mesh.weight_values)]
    lab = limb_labels(sk, mesh, bone_map)
    keep = np.isin(lab, [LIMBS.index("torso"), LIMBS.index("left_arm"), LIMBS.index("right_arm")])
    new = -np.ones(mesh.num_verts, np.int64)
    new[keep] = np.arange(keep.sum())
    shirt_faces = [new[f] for f in polys if keep[f].all()]
    parts.append(("Shirt", mesh.rest_verts[keep] + 0.015 * mesh.rest_normals[keep], shirt_faces,
                  mesh.weight_bones[keep], mesh.weight_values[keep]))
    G = sk.rest_global
    grip = 0.5 * (G[sk.index("right_hand"), :3, 3] + G[sk.index("right_middle_1"), :3, 3])
    frame = np.eye(4)
    frame[:3, 3] = grip + (0, -0.45, 0)
    v, f = rounded_box(frame, (0.015, 0.5, 0.035))
    parts.append(("Sword", v, f, *rigid(v, sk.index("right_hand"))))
    top = G[sk.index("head"), :3, 3]
    for side, sx in (("L", 1), ("R", -1)):
        frame = np.eye(4)
        frame[:3, 3] = top + (sx * 0.03, -0.07, 0.07)
        v, f = rounded_box(frame, (0.013, 0.013, 0.013), rings=6, segments=8, exponent=1.0)
        parts.append((f"Eye.{side}", v, f, *rigid(v, sk.index("head"))))
    return parts


def test_a_sword_a_shirt_and_eyes_are_not_the_body(body):
    sk, mesh, bone_map = body
    merged = merge("Dressed", dressed_parts(sk, mesh, bone_map))
    got = classify_parts(sk, merged, bone_map)
    assert got["Body"] == ""
    assert got["Shirt"] == "lies over 'Body'"
    assert got["Eye.L"] == got["Eye.R"] == "lies inside 'Body'"
    assert got["Sword"].startswith("held by bone 'right_hand'") and got["Sword"].endswith("a prop")


def test_a_robot_made_of_rigid_parts_is_all_body(body):
    sk, _, bone_map = body
    G = sk.rest_global
    parts = []
    for c in CORE_BONES:
        if c == "hips":
            continue
        h = G[sk.index(c), :3, 3]
        t = G[sk.index(CHAIN_CHILD[c]), :3, 3] if c in CHAIN_CHILD else h + 0.2 * G[sk.index(c), :3, 1]
        frame = G[sk.index(c)].copy()
        frame[:3, 3] = 0.5 * (h + t)
        half = 0.5 * np.linalg.norm(t - h) + 0.01
        r = 0.1 if c == "head" else 0.05
        v, f = rounded_box(frame, (r, max(half, 0.05), r))
        parts.append((f"Robot_{c}", v, f, *rigid(v, sk.index(c))))
    merged = merge("Robot", parts)
    assert set(classify_parts(sk, merged, bone_map).values()) == {""}


def test_the_users_choice_wins_and_bad_choices_say_what_to_do(body):
    sk, mesh, bone_map = body
    merged = merge("Dressed", dressed_parts(sk, mesh, bone_map))
    got = choose_body(sk, merged, bone_map, {"Sword": True, "Eye.L": True})
    assert got.used == ("Body", "Sword", "Eye.L")
    assert set(got.left_out) == {"Shirt", "Eye.R"}
    assert "'Shirt' (lies over 'Body')" in got.note("Dressed") and "meshes" in got.note("Dressed")
    assert choose_body(sk, merged, bone_map, {n: n != "Body" for n in merged.part_names}).left_out == \
        {"Body": "left out by the user"}
    with pytest.raises(CoreError, match="no mesh named 'Cape'.*'Body'"):
        choose_body(sk, merged, bone_map, {"Cape": False})
    with pytest.raises(CoreError, match="every mesh is left out"):
        choose_body(sk, merged, bone_map, {n: False for n in merged.part_names})


def test_submesh_keeps_the_chosen_parts_and_remaps_key_vertices(body):
    sk, mesh, bone_map = body
    merged = merge("Dressed", dressed_parts(sk, mesh, bone_map))
    sub, new = submesh(merged, ("Body", "Sword"))
    assert sub.part_names == ("Body", "Sword") and sub.num_verts == int(np.isin(merged.part, [0, 2]).sum())
    np.testing.assert_array_equal(sub.rest_verts, merged.rest_verts[new >= 0])
    kept_faces = [merged.part[merged.face_indices[s]] for s in merged.face_offsets[:-1]]
    assert len(sub.face_offsets) - 1 == sum(p in (0, 2) for p in kept_faces)
    assert sub.face_indices.min() >= 0 and sub.face_indices.max() < sub.num_verts
    sword = np.nonzero(merged.part == 2)[0][:3]
    shirt = np.nonzero(merged.part == 1)[0][:2]
    kv = KeyVertexSet(("a", "b", "c"), ("torso", "torso", "torso"), np.array([5, shirt[0], sword[1]]))
    ids = remap_keyverts(kv, new).vertex_ids
    assert ids[0] == 5 and ids[1] == -1 and sub.part[ids[2]] == 1


def test_key_vertices_and_height_come_from_the_body_only(body):
    sk, mesh, bone_map = body
    merged = merge("Dressed", dressed_parts(sk, mesh, bone_map))
    built = build_character(CharacterSpec(sk, merged, bone_map), keyvert_count=41)
    ch = built.character
    assert ch.mesh.part_names == ("Body",) and set(built.meshes_left_out) == {"Shirt", "Sword", "Eye.L", "Eye.R"}
    assert any("left out" in n and "'Sword'" in n for n in built.notes)
    alone = build_character(CharacterSpec(sk, mesh, bone_map), keyvert_count=41).character
    assert ch.height == pytest.approx(alone.height)
    np.testing.assert_array_equal(ch.keyverts.vertex_ids, alone.keyverts.vertex_ids)
