"""The generated zoo: characters built the way users bring them, as real Blender objects, from the project's own
code (``core.body``, no third-party asset). Tests retarget real clips onto them; docs render them.

- ``robot``: a rigid-part robot. Its head, arms, legs, hands and feet are separate meshes that move with a bone:
  parented to the bone (head, arms, legs), through an empty parented to the bone (hands, feet), or by a Child Of
  constraint (toes); only its torso is skinned (Armature modifier). Bone names Pelvis, Spine, Thigh.L, Shin.L...
- ``game_rig``: a game-engine rig (Unreal names: root, pelvis, thigh_l, calf_l, foot_l, ball_l) whose deforming
  feet are IK bones parented to the root, not to the shins; one skinned body.
- ``creature``: a big head on short legs and a belly (``core.body`` with head_size 1.9, leg_length 0.6).
- ``dressed``: a body holding a sword (a mesh parented to its right hand bone), in a shirt (a second skinned mesh
  over its torso and arms) and with eyes (two small spheres parented to its head bone, inside the head).

    python tools/zoo.py --out zoo.blend                 # build every character, side by side
    python tools/zoo.py --out zoo.blend --only robot game_rig

Runs with the bpy wheel or inside Blender (``blender -b --python tools/zoo.py -- ARGS``).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from core.body import BodyParams, body_model, canonical_skeleton, make_body  # noqa: E402
from core.rig.humanoid import CORE_BONES, LIMBS  # noqa: E402
from core.rig.parts import limb_labels  # noqa: E402
from core.types import Skeleton  # noqa: E402
from tools.make_demo_scene import build_armature, build_character, mesh_object, polygons, skin  # noqa: E402

#: canonical bone -> the robot's bone name
ROBOT_BONES = {"hips": "Pelvis", "spine": "Spine", "chest": "Chest", "upper_chest": "Ribcage", "neck": "Neck",
               "head": "Head"}
#: canonical bone -> the game rig's bone name (Unreal Engine's mannequin naming)
GAME_BONES = {"hips": "pelvis", "spine": "spine_01", "chest": "spine_02", "upper_chest": "spine_03",
              "neck": "neck_01", "head": "head"}
for _side, _s in (("left", "L"), ("right", "R")):
    ROBOT_BONES.update({f"{_side}_shoulder": f"Shoulder.{_s}", f"{_side}_upper_arm": f"UpperArm.{_s}",
                        f"{_side}_lower_arm": f"LowerArm.{_s}", f"{_side}_hand": f"Hand.{_s}",
                        f"{_side}_upper_leg": f"Thigh.{_s}", f"{_side}_lower_leg": f"Shin.{_s}",
                        f"{_side}_foot": f"Foot.{_s}", f"{_side}_toes": f"Toe.{_s}"})
    _l = _s.lower()
    GAME_BONES.update({f"{_side}_shoulder": f"clavicle_{_l}", f"{_side}_upper_arm": f"upperarm_{_l}",
                       f"{_side}_lower_arm": f"lowerarm_{_l}", f"{_side}_hand": f"hand_{_l}",
                       f"{_side}_upper_leg": f"thigh_{_l}", f"{_side}_lower_leg": f"calf_{_l}",
                       f"{_side}_foot": f"foot_{_l}", f"{_side}_toes": f"ball_{_l}"})
    for _f in ("thumb", "index", "middle", "ring", "little"):
        for _k in (1, 2, 3):
            GAME_BONES[f"{_side}_{_f}_{_k}"] = f"{'pinky' if _f == 'little' else _f}_0{_k}_{_l}"

#: sizes of the robot's parts: canonical bone -> (half width, half depth) in metres, around the bone's axis
ROBOT_PARTS = {"head": (0.10, 0.11), "upper_arm": (0.05, 0.05), "lower_arm": (0.042, 0.042), "hand": (0.04, 0.025),
               "upper_leg": (0.075, 0.075), "lower_leg": (0.058, 0.058)}


# ------------------------------------------------------------------------------------------ geometry (numpy)

def rounded_box(frame: np.ndarray, half, rings: int = 10, segments: int = 16, exponent: float = 0.35):
    """A closed rounded box (a superellipsoid) around ``frame`` (4, 4: centre and axes, armature space) with
    half sizes ``half`` (x, y, z) along its axes: ((V, 3) vertices, polygons), poles on its Y axis."""
    def sp(c):
        return np.sign(c) * np.abs(c) ** exponent
    u = np.linspace(-np.pi / 2, np.pi / 2, rings + 1)[1:-1]
    v = np.linspace(-np.pi, np.pi, segments, endpoint=False)
    U, Vv = np.meshgrid(u, v, indexing="ij")
    pts = np.stack([half[0] * sp(np.cos(U)) * sp(np.cos(Vv)), half[1] * sp(np.sin(U)),
                    half[2] * sp(np.cos(U)) * sp(np.sin(Vv))], -1).reshape(-1, 3)
    pts = np.vstack([pts, [[0, -half[1], 0], [0, half[1], 0]]])
    n_ring = rings - 1
    faces = []
    for r in range(n_ring - 1):
        for s in range(segments):
            a, b = r * segments + s, r * segments + (s + 1) % segments
            faces.append([a, a + segments, b + segments, b])          # wound so that normals point out
    south, north = len(pts) - 2, len(pts) - 1
    top = (n_ring - 1) * segments
    for s in range(segments):
        faces.append([south, s, (s + 1) % segments])
        faces.append([north, top + (s + 1) % segments, top + s])
    return pts @ frame[:3, :3].T + frame[:3, 3], faces


def _bone_box(G: np.ndarray, head, tail, half_w: float, half_d: float, overlap: float = 0.02):
    """A rounded box from ``head`` to ``tail`` (armature space) oriented by the bone matrix ``G``."""
    frame = G.copy()
    frame[:3, 3] = 0.5 * (np.asarray(head) + np.asarray(tail))
    half_len = 0.5 * np.linalg.norm(np.asarray(tail) - np.asarray(head)) + overlap
    return rounded_box(frame, (half_w, half_len, half_d))


def _world_box(lo, hi):
    """A rounded box filling the axis-aligned box [lo, hi] (its poles along Y)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    frame = np.eye(4)
    frame[:3, 3] = 0.5 * (lo + hi)
    return rounded_box(frame, 0.5 * (hi - lo), exponent=0.25)


def renamed(skeleton: Skeleton, names: dict, name: str) -> Skeleton:
    """``skeleton`` (canonical bone names) with its bones renamed by ``names`` (canonical -> name)."""
    return Skeleton(name, [names.get(n, n) for n in skeleton.names], skeleton.parents, skeleton.rest_local,
                    skeleton.object_matrix)


# ------------------------------------------------------------------------------------------ Blender objects

def _attach_to_bone(ob, arm, bone: str):
    """Parent ``ob`` to ``bone`` of ``arm`` (parent type BONE) keeping its world placement."""
    import bpy
    from mathutils import Matrix

    M = ob.matrix_world.copy()
    ob.parent = arm
    ob.parent_type = 'BONE'
    ob.parent_bone = bone
    b = arm.data.bones[bone]
    tail = arm.matrix_world @ b.matrix_local @ Matrix.Translation((0.0, b.length, 0.0))  # bone parents sit at tails
    ob.matrix_parent_inverse = tail.inverted() @ M
    ob.matrix_basis = Matrix.Identity(4)
    bpy.context.view_layer.update()


def robot(name: str = "Robot", x: float = 0.0, height: float = 1.8):
    """The rigid-part robot (module docstring); returns its armature."""
    import bpy
    from mathutils import Matrix

    joints = {k: v for k, v in body_model(BodyParams(height=height, name=name)).joints.items() if k in CORE_BONES}
    sk = canonical_skeleton(joints, name)
    G = sk.rest_global
    arm = build_armature(name, renamed(sk, ROBOT_BONES, name), x)
    offset = Matrix.Translation((x, 0.0, 0.0))

    def part(label, verts, faces):
        ob = mesh_object(f"{name}_{label}", verts, faces)
        ob.matrix_world = offset
        return ob
    # the torso, skinned over pelvis .. ribcage (weights linear in height between the bone heads)
    hips, neck = joints["hips"][0], joints["neck"][0]
    verts, faces = _world_box((-0.16, -0.1, hips[2] - 0.08), (0.16, 0.1, neck[2] + 0.02))
    torso = part("Torso", verts, faces)
    torso.parent = arm
    torso.matrix_parent_inverse = arm.matrix_world.inverted()
    chain = ["hips", "spine", "chest", "upper_chest"]
    zs = np.array([joints[c][0][2] for c in chain] + [neck[2]])
    wb = np.zeros((len(verts), 2), np.int64)
    wv = np.zeros((len(verts), 2))
    for v, z in enumerate(verts[:, 2]):
        k = int(np.clip(np.searchsorted(zs, z) - 1, 0, len(chain) - 1))
        f = float(np.clip((z - zs[k]) / (zs[k + 1] - zs[k]), 0.0, 1.0))
        wb[v] = [sk.index(chain[k]), sk.index(chain[min(k + 1, len(chain) - 1)])]
        wv[v] = [1.0 - 0.5 * f, 0.5 * f]
    skin(torso, arm, [ROBOT_BONES[n] for n in sk.names], wb, wv)
    for side, s in (("left", "L"), ("right", "R")):
        for c in ("upper_arm", "lower_arm", "upper_leg", "lower_leg"):
            h, t = joints[f"{side}_{c}"]
            ob = part(f"{c.title().replace('_', '')}.{s}", *_bone_box(G[sk.index(f"{side}_{c}")], h, t,
                                                                        *ROBOT_PARTS[c]))
            _attach_to_bone(ob, arm, ROBOT_BONES[f"{side}_{c}"])
        # hand and foot through an empty on their bone (a socket, as game-ready rigid props are built)
        for c, label in (("hand", "Hand"), ("foot", "Foot")):
            mount = bpy.data.objects.new(f"{name}_{label}Mount.{s}", None)
            bpy.context.scene.collection.objects.link(mount)
            mount.matrix_world = offset
            _attach_to_bone(mount, arm, ROBOT_BONES[f"{side}_{c}"])
            if c == "hand":
                h, t = joints[f"{side}_hand"]
                verts, faces = _bone_box(G[sk.index(f"{side}_hand")], h, t + 0.6 * (t - h), *ROBOT_PARTS["hand"])
            else:
                ankle, ball = joints[f"{side}_foot"][0], joints[f"{side}_toes"][0]
                verts, faces = _world_box((ankle[0] - 0.055, ball[1], 0.0), (ankle[0] + 0.055, ankle[1] + 0.06,
                                                                              ankle[2] + 0.03))
            ob = part(f"{label}.{s}", verts, faces)
            ob.parent = mount
            ob.matrix_parent_inverse = mount.matrix_world.inverted()
        # the toes follow their bone by a Child Of constraint (no parent)
        ball, tip = joints[f"{side}_toes"]
        verts, faces = _world_box((ball[0] - 0.05, tip[1] - 0.01, 0.0), (ball[0] + 0.05, ball[1], 0.035))
        toes = part(f"Toes.{s}", verts, faces)
        con = toes.constraints.new('CHILD_OF')
        con.target, con.subtarget = arm, ROBOT_BONES[f"{side}_toes"]
        bone = arm.data.bones[ROBOT_BONES[f"{side}_toes"]]
        con.inverse_matrix = (arm.matrix_world @ bone.matrix_local).inverted()
    h, t = joints["head"]
    head = part("Head", *_bone_box(G[sk.index("head")], h, t + 0.3 * (t - h), *ROBOT_PARTS["head"]))
    _attach_to_bone(head, arm, "Head")
    bpy.context.view_layer.update()
    return arm


def game_rig(name: str = "GameRig", x: float = 0.0, resolution: float = 0.02):
    """The game rig whose IK feet hang from the root (module docstring); returns its armature."""
    sk, mesh, _ = make_body(BodyParams(height=1.78, name=name, resolution=resolution), pose="A")
    G = sk.rest_global
    names = ["root"] + [GAME_BONES.get(n, n) for n in sk.names]
    parents = [-1] + [0 if c.endswith("_foot") or p < 0 else p + 1 for c, p in zip(sk.names, sk.parents)]
    Gs = np.concatenate([np.eye(4)[None], G])
    rest_local = np.stack([Gs[j] if p < 0 else np.linalg.inv(Gs[p]) @ Gs[j] for j, p in enumerate(parents)])
    rig = Skeleton(name, names, parents, rest_local)
    # the shins end at the ankles, as in the game rig it mimics (their feet are not their children)
    ankle = {s: np.linalg.norm(G[sk.index(f"{s}_foot"), :3, 3] - G[sk.index(f"{s}_lower_leg"), :3, 3])
             for s in ("left", "right")}
    arm = build_armature(name, rig, x, lengths={"calf_l": ankle["left"], "calf_r": ankle["right"]})
    body = mesh_object(f"{name}_body", mesh.rest_verts, polygons(mesh), parent=arm)
    skin(body, arm, names, mesh.weight_bones + 1, mesh.weight_values)
    return arm


def creature(name: str = "Creature", x: float = 0.0, resolution: float = 0.02):
    """A big head on short legs (module docstring); returns its armature."""
    params = BodyParams(height=1.15, head_size=1.9, leg_length=0.6, arm_length=0.85, torso_width=1.15,
                        torso_depth=1.1, belly=0.6, neck_length=0.7, name=name, resolution=resolution)
    sk, mesh, _ = make_body(params, pose="T")
    return build_character(name, sk, mesh, x)


def dressed(name: str = "Dressed", x: float = 0.0, resolution: float = 0.02):
    """A body with a sword in its right hand, a shirt and eyes (module docstring); returns its armature."""
    import bpy
    from mathutils import Matrix

    sk, mesh, _ = make_body(BodyParams(height=1.75, name=name, resolution=resolution), pose="T")
    arm = build_character(name, sk, mesh, x)
    offset = Matrix.Translation((x, 0.0, 0.0))
    G = sk.rest_global
    # the shirt: the torso and upper arms of the body, 1.5 cm out along the normals, skinned the same way
    lab = limb_labels(sk, mesh, {n: n for n in sk.names})
    keep = np.isin(lab, [LIMBS.index(k) for k in ("torso", "left_arm", "right_arm")])
    keep &= mesh.rest_verts[:, 2] > G[sk.index("hips"), 2, 3] - 0.12
    keep &= np.abs(mesh.rest_verts[:, 0]) < G[sk.index("left_lower_arm"), 0, 3]
    new = -np.ones(mesh.num_verts, np.int64)
    new[keep] = np.arange(int(keep.sum()))
    faces = [f for f in polygons(mesh) if keep[f].all()]
    shirt = mesh_object(f"{name}_Shirt", mesh.rest_verts[keep] + 0.015 * mesh.rest_normals[keep],
                        [new[f].tolist() for f in faces], parent=arm)
    skin(shirt, arm, sk.names, mesh.weight_bones[keep], mesh.weight_values[keep])
    # the sword, parented to the right hand bone: a grip in the hand and a 0.9 m blade pointing forward
    h, t = G[sk.index("right_hand"), :3, 3], G[sk.index("right_middle_1"), :3, 3]
    grip = 0.5 * (h + t)
    verts, faces = _world_box(grip + (-0.015, -0.95, -0.035), grip + (0.015, 0.05, 0.035))
    sword = mesh_object(f"{name}_Sword", verts, faces)
    sword.matrix_world = offset
    _attach_to_bone(sword, arm, "right_hand")
    # the eyes: two small spheres inside the front of the head, parented to the head bone
    top = G[sk.index("head"), :3, 3]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        frame = np.eye(4)
        frame[:3, 3] = top + (sx * 0.032, -0.075, 0.075)
        verts, faces = rounded_box(frame, (0.014, 0.014, 0.014), rings=6, segments=8, exponent=1.0)
        eye = mesh_object(f"{name}_Eye.{side}", verts, faces)
        eye.matrix_world = offset
        _attach_to_bone(eye, arm, "head")
    bpy.context.view_layer.update()
    return arm


ZOO = {"robot": robot, "game_rig": game_rig, "creature": creature, "dressed": dressed}


def build_zoo(only=None, spacing: float = 1.3) -> dict:
    """Every zoo character (or those named in ``only``) in the current scene, ``spacing`` metres apart along X:
    {key: armature object}."""
    keys = list(only) if only else list(ZOO)
    return {k: ZOO[k](x=spacing * i) for i, k in enumerate(keys)}


def main(argv=None):
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="zoo.blend", help="the .blend to write")
    p.add_argument("--only", nargs="+", choices=sorted(ZOO), help="build only these characters")
    args = p.parse_args(argv)
    if "bpy" not in sys.modules:
        import tempfile
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_zoo_"))
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    for key, arm in build_zoo(args.only).items():
        print(f"{key}: armature '{arm.name}'")
    bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.out))
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    from tools.extension import exit_after
    exit_after(main)
