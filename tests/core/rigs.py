"""Synthetic humanoid skeletons with real-world naming schemes, rest poses (T / A), bone rolls and armature
object transforms, for the bone-map and copy-rotations tests. No bpy."""

from __future__ import annotations

import numpy as np

from core.rig.rotations import quat_multiply, quat_normalize, quat_to_matrix
from core.types import Character, Motion, Skeleton

# canonical joint: (parent, head) in metres, T-pose, facing -Y (left = +X); tails = first child head.
JOINTS = {
    "hips": (None, (0, 0, 1.00)),
    "spine": ("hips", (0, 0.01, 1.10)),
    "chest": ("spine", (0, 0.0, 1.25)),
    "upper_chest": ("chest", (0, -0.01, 1.35)),
    "neck": ("upper_chest", (0, 0, 1.47)),
    "head": ("neck", (0, -0.01, 1.57)),
    "head_end": ("head", (0, -0.01, 1.75)),
    "left_shoulder": ("upper_chest", (0.03, -0.02, 1.42)),
    "left_upper_arm": ("left_shoulder", (0.17, 0.0, 1.42)),
    "left_lower_arm": ("left_upper_arm", (0.45, 0.01, 1.42)),
    "left_hand": ("left_lower_arm", (0.70, 0.0, 1.42)),
    "left_middle_1": ("left_hand", (0.79, 0.0, 1.42)),
    "left_middle_2": ("left_middle_1", (0.83, 0.0, 1.42)),
    "left_thumb_1": ("left_hand", (0.73, -0.03, 1.41)),
    "left_thumb_2": ("left_thumb_1", (0.76, -0.06, 1.41)),
    "left_upper_leg": ("hips", (0.10, 0, 0.96)),
    "left_lower_leg": ("left_upper_leg", (0.10, 0.01, 0.52)),
    "left_foot": ("left_lower_leg", (0.10, 0.02, 0.09)),
    "left_toes": ("left_foot", (0.10, -0.11, 0.02)),
    "left_toes_end": ("left_toes", (0.10, -0.18, 0.01)),
}
for _k in list(JOINTS):
    if _k.startswith("left_"):
        _p, _h = JOINTS[_k]
        JOINTS["right_" + _k[5:]] = ("right_" + _p[5:] if _p.startswith("left_") else _p, (-_h[0], _h[1], _h[2]))

NAMING = {
    "mixamo": {"hips": "mixamorig:Hips", "spine": "mixamorig:Spine", "chest": "mixamorig:Spine1",
               "upper_chest": "mixamorig:Spine2", "neck": "mixamorig:Neck", "head": "mixamorig:Head",
               "head_end": "mixamorig:HeadTop_End", "{s}_shoulder": "mixamorig:{S}Shoulder",
               "{s}_upper_arm": "mixamorig:{S}Arm", "{s}_lower_arm": "mixamorig:{S}ForeArm",
               "{s}_hand": "mixamorig:{S}Hand", "{s}_middle_1": "mixamorig:{S}HandMiddle1",
               "{s}_middle_2": "mixamorig:{S}HandMiddle2", "{s}_thumb_1": "mixamorig:{S}HandThumb1",
               "{s}_thumb_2": "mixamorig:{S}HandThumb2", "{s}_upper_leg": "mixamorig:{S}UpLeg",
               "{s}_lower_leg": "mixamorig:{S}Leg", "{s}_foot": "mixamorig:{S}Foot",
               "{s}_toes": "mixamorig:{S}ToeBase", "{s}_toes_end": "mixamorig:{S}Toe_End"},
    "unreal": {"hips": "pelvis", "spine": "spine_01", "chest": "spine_02", "upper_chest": "spine_03",
               "neck": "neck_01", "head": "head", "head_end": None, "{s}_shoulder": "clavicle_{l}",
               "{s}_upper_arm": "upperarm_{l}", "{s}_lower_arm": "lowerarm_{l}", "{s}_hand": "hand_{l}",
               "{s}_middle_1": "middle_01_{l}", "{s}_middle_2": "middle_02_{l}", "{s}_thumb_1": "thumb_01_{l}",
               "{s}_thumb_2": "thumb_02_{l}", "{s}_upper_leg": "thigh_{l}", "{s}_lower_leg": "calf_{l}",
               "{s}_foot": "foot_{l}", "{s}_toes": "ball_{l}", "{s}_toes_end": None},
    "rigify": {"hips": "DEF-spine", "spine": "DEF-spine.001", "chest": "DEF-spine.002",
               "upper_chest": "DEF-spine.003", "neck": "DEF-spine.004", "head": "DEF-spine.006",
               "head_end": None, "{s}_shoulder": "DEF-shoulder.{L}", "{s}_upper_arm": "DEF-upper_arm.{L}",
               "{s}_lower_arm": "DEF-forearm.{L}", "{s}_hand": "DEF-hand.{L}", "{s}_middle_1": "DEF-f_middle.01.{L}",
               "{s}_middle_2": "DEF-f_middle.02.{L}", "{s}_thumb_1": "DEF-thumb.01.{L}",
               "{s}_thumb_2": "DEF-thumb.02.{L}", "{s}_upper_leg": "DEF-thigh.{L}", "{s}_lower_leg": "DEF-shin.{L}",
               "{s}_foot": "DEF-foot.{L}", "{s}_toes": "DEF-toe.{L}", "{s}_toes_end": None},
    "metarig": {"hips": "spine", "spine": "spine.001", "chest": "spine.002", "upper_chest": "spine.003",
                "neck": "spine.004", "head": "spine.006", "head_end": None, "{s}_shoulder": "shoulder.{L}",
                "{s}_upper_arm": "upper_arm.{L}", "{s}_lower_arm": "forearm.{L}", "{s}_hand": "hand.{L}",
                "{s}_middle_1": "f_middle.01.{L}", "{s}_middle_2": "f_middle.02.{L}", "{s}_thumb_1": "thumb.01.{L}",
                "{s}_thumb_2": "thumb.02.{L}", "{s}_upper_leg": "thigh.{L}", "{s}_lower_leg": "shin.{L}",
                "{s}_foot": "foot.{L}", "{s}_toes": "toe.{L}", "{s}_toes_end": None},
    "cmu": {"hips": "Hips", "spine": "LowerBack", "chest": "Spine", "upper_chest": "Spine1", "neck": "Neck",
            "head": "Head", "head_end": "Head_end", "{s}_shoulder": "{S}Shoulder", "{s}_upper_arm": "{S}Arm",
            "{s}_lower_arm": "{S}ForeArm", "{s}_hand": "{S}Hand", "{s}_middle_1": "{S}FingerBase",
            "{s}_middle_2": "{S}HandIndex1", "{s}_thumb_1": "{L}Thumb", "{s}_thumb_2": None,
            "{s}_upper_leg": "{S}UpLeg", "{s}_lower_leg": "{S}Leg", "{s}_foot": "{S}Foot",
            "{s}_toes": "{S}ToeBase", "{s}_toes_end": "{S}ToeBase_end"},
    "vrm": {"hips": "J_Bip_C_Hips", "spine": "J_Bip_C_Spine", "chest": "J_Bip_C_Chest",
            "upper_chest": "J_Bip_C_UpperChest", "neck": "J_Bip_C_Neck", "head": "J_Bip_C_Head", "head_end": None,
            "{s}_shoulder": "J_Bip_{L}_Shoulder", "{s}_upper_arm": "J_Bip_{L}_UpperArm",
            "{s}_lower_arm": "J_Bip_{L}_LowerArm", "{s}_hand": "J_Bip_{L}_Hand", "{s}_middle_1": "J_Bip_{L}_Middle1",
            "{s}_middle_2": "J_Bip_{L}_Middle2", "{s}_thumb_1": "J_Bip_{L}_Thumb1", "{s}_thumb_2": "J_Bip_{L}_Thumb2",
            "{s}_upper_leg": "J_Bip_{L}_UpperLeg", "{s}_lower_leg": "J_Bip_{L}_LowerLeg",
            "{s}_foot": "J_Bip_{L}_Foot", "{s}_toes": "J_Bip_{L}_ToeBase", "{s}_toes_end": None},
    "cc": {"hips": "CC_Base_Hip", "spine": "CC_Base_Waist", "chest": "CC_Base_Spine01",
           "upper_chest": "CC_Base_Spine02", "neck": "CC_Base_NeckTwist01", "head": "CC_Base_Head",
           "head_end": None, "{s}_shoulder": "CC_Base_{L}_Clavicle", "{s}_upper_arm": "CC_Base_{L}_Upperarm",
           "{s}_lower_arm": "CC_Base_{L}_Forearm", "{s}_hand": "CC_Base_{L}_Hand", "{s}_middle_1": "CC_Base_{L}_Mid1",
           "{s}_middle_2": "CC_Base_{L}_Mid2", "{s}_thumb_1": "CC_Base_{L}_Thumb1", "{s}_thumb_2": "CC_Base_{L}_Thumb2",
           "{s}_upper_leg": "CC_Base_{L}_Thigh", "{s}_lower_leg": "CC_Base_{L}_Calf", "{s}_foot": "CC_Base_{L}_Foot",
           "{s}_toes": "CC_Base_{L}_ToeBase", "{s}_toes_end": None},
    "daz": {"hips": "hip", "spine": "abdomen", "chest": "chest", "upper_chest": None, "neck": "neck",
            "head": "head", "head_end": None, "{s}_shoulder": "{l}Collar", "{s}_upper_arm": "{l}Shldr",
            "{s}_lower_arm": "{l}ForeArm", "{s}_hand": "{l}Hand", "{s}_middle_1": "{l}Mid1", "{s}_middle_2": "{l}Mid2",
            "{s}_thumb_1": "{l}Thumb1", "{s}_thumb_2": "{l}Thumb2", "{s}_upper_leg": "{l}Thigh",
            "{s}_lower_leg": "{l}Shin", "{s}_foot": "{l}Foot", "{s}_toes": None, "{s}_toes_end": None},
    "bandai": {"hips": "Hips", "spine": "Spine", "chest": "Chest", "upper_chest": None, "neck": "Neck",
               "head": "Head", "head_end": None, "{s}_shoulder": "Shoulder_{L}", "{s}_upper_arm": "UpperArm_{L}",
               "{s}_lower_arm": "LowerArm_{L}", "{s}_hand": "Hand_{L}", "{s}_middle_1": None, "{s}_middle_2": None,
               "{s}_thumb_1": None, "{s}_thumb_2": None, "{s}_upper_leg": "UpperLeg_{L}",
               "{s}_lower_leg": "LowerLeg_{L}", "{s}_foot": "Foot_{L}", "{s}_toes": "Toes_{L}",
               "{s}_toes_end": None},
    "generic": {"hips": "pelvis_main", "spine": "torso_a", "chest": "torso_b", "upper_chest": "torso_c",
                "neck": "neck", "head": "head", "head_end": None, "{s}_shoulder": "{s}_clavicle",
                "{s}_upper_arm": "{s}_upperarm", "{s}_lower_arm": "{s}_forearm", "{s}_hand": "{s}_hand",
                "{s}_middle_1": "{s}_middle1", "{s}_middle_2": "{s}_middle2", "{s}_thumb_1": "{s}_thumb1",
                "{s}_thumb_2": None, "{s}_upper_leg": "{s}_thigh", "{s}_lower_leg": "{s}_shin",
                "{s}_foot": "{s}_foot", "{s}_toes": "{s}_toe", "{s}_toes_end": None},
}

#: joint whose head is the tail of each bone (its main child)
TAIL_OF = {"hips": "spine", "spine": "chest", "chest": "upper_chest", "upper_chest": "neck", "neck": "head",
           "head": "head_end", "left_shoulder": "left_upper_arm", "left_upper_arm": "left_lower_arm",
           "left_lower_arm": "left_hand", "left_hand": "left_middle_1", "left_middle_1": "left_middle_2",
           "left_thumb_1": "left_thumb_2", "left_upper_leg": "left_lower_leg", "left_lower_leg": "left_foot",
           "left_foot": "left_toes", "left_toes": "left_toes_end"}


def bone_name(style: str, joint: str):
    """Bone name of canonical joint ``joint`` in naming ``style`` (None when that rig lacks it)."""
    table = NAMING[style]
    if joint in table:
        return table[joint]
    side, rest = joint.split("_", 1)
    pattern = table.get("{s}_" + rest)
    if pattern is None:
        return None
    return pattern.format(s=side, S=side.capitalize(), l=side[0], L=side[0].upper())


def _rot(axis, deg):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    a = np.radians(deg) / 2
    return quat_to_matrix(np.concatenate([[np.cos(a)], np.sin(a) * axis]))


def make_skeleton(style="unreal", arm_angle=0.0, roll_seed=None, object_matrix=None, units=1.0, proportions=None,
                  extra_root=False, name=None, turn_world=False):
    """A humanoid Skeleton.

    arm_angle: degrees the arms hang below horizontal at rest (0 = T-pose, 45 = A-pose).
    roll_seed: random roll of every bone about its own Y axis (None = deterministic Blender-like roll).
    object_matrix: the armature object's matrix; the bone data is expressed so that the world-space
        skeleton is the same (unless ``turn_world``: then the object matrix turns/moves the character) (``units``:
        armature units per metre, e.g. 100 for FBX in cm with scale 0.01).
    proportions: optional {joint: scale} applied to the segment ending at that joint.
    """
    rng = np.random.default_rng(roll_seed) if roll_seed is not None else None
    heads = {k: np.array(v[1], float) for k, v in JOINTS.items()}
    if proportions:
        out = {}
        for k, (p, _) in JOINTS.items():
            if p is None:
                out[k] = heads[k] * proportions.get("hips", 1.0)
            else:
                out[k] = out[p] + (heads[k] - heads[p]) * proportions.get(k, 1.0)
        heads = out
    # A-pose: rotate each arm about the forward axis at the upper-arm head
    for side, sign in (("left", 1.0), ("right", -1.0)):
        R = _rot([0, 1, 0], sign * arm_angle)   # left arm (+X) rotated down around +Y
        pivot = heads[f"{side}_upper_arm"].copy()
        for k in heads:
            if k.startswith(f"{side}_") and any(x in k for x in ("lower_arm", "hand", "middle", "thumb")):
                heads[k] = pivot + R @ (heads[k] - pivot)
    keep = [k for k in JOINTS if bone_name(style, k) is not None]
    if extra_root:
        keep = ["__root__"] + keep
    names, parents, mats = [], [], []
    for k in keep:
        if k == "__root__":
            names.append("Root")
            parents.append(-1)
            mats.append(np.eye(4))
            continue
        p = JOINTS[k][0]
        while p is not None and p not in keep:
            p = JOINTS[p][0]
        nxt = TAIL_OF.get(k.replace("right_", "left_"))
        if nxt is not None:
            tail = heads[nxt if not k.startswith("right_") else nxt.replace("left_", "right_")]
        else:
            d = heads[k] - heads[JOINTS[k][0]]
            tail = heads[k] + 0.05 * d / max(np.linalg.norm(d), 1e-9)
        y = tail - heads[k]
        y /= np.linalg.norm(y)
        ref = np.array([0, 0, 1.0]) if abs(y[2]) < 0.9 else np.array([0, -1.0, 0])
        x = np.cross(y, ref)
        x /= np.linalg.norm(x)
        z = np.cross(x, y)
        R = np.stack([x, y, z], 1)
        if rng is not None:
            R = R @ _rot([0, 1, 0], rng.uniform(-180, 180))
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = R, heads[k]
        names.append(bone_name(style, k))
        parents.append(keep.index(p) if p is not None else (0 if extra_root else -1))
        mats.append(m)
    world = np.stack(mats)                                    # desired world matrices (metres)
    M = np.eye(4) if object_matrix is None else np.asarray(object_matrix, float)
    if turn_world:                                            # the object matrix moves the character
        world = M @ world
    Minv = np.linalg.inv(M)
    arm = np.empty_like(world)
    for j in range(len(world)):                               # armature-space rest matrices (rotation only)
        a = Minv @ world[j]
        a[:3, :3] /= np.linalg.norm(a[:3, :3], axis=0)
        arm[j] = a
    rest_local = np.empty_like(arm)
    for j, p in enumerate(parents):
        rest_local[j] = arm[j] if p < 0 else np.linalg.inv(arm[p]) @ arm[j]
    return Skeleton(name or style, names, parents, rest_local, M)


def object_matrix(scale=1.0, z_deg=0.0, x_deg=0.0, translation=(0, 0, 0)):
    m = np.eye(4)
    m[:3, :3] = _rot([0, 0, 1], z_deg) @ _rot([1, 0, 0], x_deg) * scale
    m[:3, 3] = translation
    return m


def random_motion(skeleton, frames=12, seed=0, amplitude=0.6, travel=(0.3, 0.1, 0.05)):
    """Random smooth local rotations on every bone and a drifting root (armature units)."""
    rng = np.random.default_rng(seed)
    J = skeleton.num_bones
    t = np.linspace(0, 1, frames)[:, None, None]
    axis = rng.normal(size=(1, J, 3))
    ang = amplitude * np.sin(2 * np.pi * (t * rng.uniform(0.5, 1.5, (1, J, 1)) + rng.uniform(0, 1, (1, J, 1))))
    q = np.concatenate([np.cos(ang / 2), np.sin(ang / 2) * axis / np.linalg.norm(axis, axis=-1, keepdims=True)], -1)
    loc = np.zeros((frames, J, 3))
    loc[:, 0] = t[:, 0] * np.asarray(travel)
    return Motion(quat_normalize(q), loc, 30.0, 1)


def character(skeleton, bone_map, mesh=None):
    return Character(skeleton, mesh, dict(bone_map))


__all__ = ["JOINTS", "NAMING", "bone_name", "make_skeleton", "object_matrix", "random_motion", "character",
           "quat_multiply"]
