"""Bone-name analysis for the automatic bone mapping (docs/bone_mapping.md, pass 1).

Each bone name is normalised (namespace such as ``mixamorig1:`` and rig prefixes such as ``DEF-``, ``J_Bip_``,
``CC_Base_`` removed, split into words at separators and camelCase) into a side (left / right / none), a part
word (``upperarm``, ``forearm``, ``thigh``, ``hand``, ...) and flags (``analyse_name`` -> ``NameInfo``). The
word tables of every supported naming scheme live here. The bone map is the input every ReConForM step
assumes given (ReConForM §3).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_NAMESPACE = re.compile(r"^.*[:|]")
_PREFIXES = ("def-", "org-", "mch-", "j_bip_", "j_adj_", "j_sec_", "j_opt_", "cc_base_", "bip001", "bip01",
             "bip_", "b_", "jnt_", "bn_", "bone_")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Words that mark helper / control / leaf bones that must never be mapped.
_HELPER_WORDS = {"ik", "fk", "pole", "target", "twist", "roll", "ctrl", "control", "helper", "tweak", "jiggle",
                 "corrective", "prop", "weapon", "gun", "end", "nub", "tip", "top", "site", "leaf", "mch", "vis",
                 "wgt", "mstr", "master", "eye", "eyes", "jaw", "tongue", "teeth", "ear", "breast", "hair", "skirt",
                 "bust", "adj", "sec", "opt", "metacarpal", "palm", "heel", "lip", "lid", "brow", "cheek", "nose"}
_ROOT_WORDS = {"root", "armature", "reference", "world", "master", "origin", "trajectory", "jointroot"}

# part words (side-less, lowercase, digits removed) -> part
_PART_WORDS = {
    "hips": "hips", "hip": "hips", "pelvis": "hips",
    "head": "head",
    "neck": "neck", "necktwist": "neck",
    "spine": "spine", "abdomen": "spine", "lowerback": "spine", "waist": "spine", "torso": "spine",
    "chest": "spine", "upperchest": "spine", "abdomen2": "spine", "back": "spine", "ribcage": "spine",
    "shoulder": "shoulder", "clavicle": "shoulder", "collar": "shoulder", "collarbone": "shoulder",
    "clav": "shoulder",
    "upperarm": "upper_arm", "arm": "upper_arm", "shldr": "upper_arm", "uparm": "upper_arm",
    "humerus": "upper_arm", "bicep": "upper_arm",
    "forearm": "lower_arm", "lowerarm": "lower_arm", "elbow": "lower_arm", "radius": "lower_arm",
    "ulna": "lower_arm", "forearms": "lower_arm",
    "hand": "hand", "wrist": "hand",
    "upleg": "upper_leg", "thigh": "upper_leg", "upperleg": "upper_leg", "femur": "upper_leg",
    "leg": "lower_leg", "shin": "lower_leg", "calf": "lower_leg", "lowerleg": "lower_leg", "knee": "lower_leg",
    "tibia": "lower_leg", "crus": "lower_leg",
    "foot": "foot", "ankle": "foot",
    "toe": "toes", "toes": "toes", "toebase": "toes", "ball": "toes",
    "hipjoint": "hip_joint", "buttock": "hip_joint",
}
_FINGER_WORDS = {"thumb": "thumb", "index": "index", "middle": "middle", "mid": "middle", "ring": "ring",
                 "pinky": "little", "little": "little", "pinkie": "little"}
#: MakeHuman default rig: finger1..5 = thumb..little.
_MH_FINGER = {1: "thumb", 2: "index", 3: "middle", 4: "ring", 5: "little"}


class NameInfo(NamedTuple):
    side: str          # 'left', 'right' or ''
    word: str          # side-less part word, lowercase, digits removed ('upperarm')
    numbers: tuple     # digits found in the name, as ints
    part: str          # canonical part ('upper_arm', 'hand', ...) or '' when unknown
    finger: str        # finger name ('index') or ''
    helper: bool       # helper/control/leaf bone: never mapped
    priority: int      # 2 deform (DEF-), 1 plain, 0 ORG-; MCH- is a helper


def _words(name: str):
    """Split a bone name into words: separators, camelCase and digits (``LeftUpLeg`` -> Left Up Leg)."""
    out = []
    for chunk in re.split(r"[\s._\-]+", name):
        out.extend(_WORD.findall(chunk))
    return out


def analyse_name(name: str) -> NameInfo:
    """Normalise one bone name into side, part word and flags (see module docstring)."""
    raw = _NAMESPACE.sub("", name)
    low = raw.lower()
    priority = 1
    if low.startswith("def-"):
        priority = 2
    elif low.startswith("org-"):
        priority = 0
    helper = low.startswith(("mch-", "wgt-", "vis_", "ctrl_", "ik_", "ikfk", "tgt-", "vis-"))
    for p in _PREFIXES:
        if low.startswith(p):
            raw = raw[len(p):]
            low = low[len(p):]
            break
    words = _words(raw)
    side = ""
    kept = []
    for w in words:
        lw = w.lower()
        if lw in ("l", "left", "lft", "lf") and not side:
            side = "left"
        elif lw in ("r", "right", "rgt", "rt") and not side:
            side = "right"
        elif lw in ("c", "center", "centre") and len(words) > 1:
            continue                                          # J_Bip_C_Hips: centre marker
        else:
            kept.append(lw)
    numbers = tuple(int(w) for w in kept if w.isdigit())
    alpha = [w for w in kept if not w.isdigit()]
    if any(w in _HELPER_WORDS for w in alpha):
        helper = True
    word = "".join(alpha)
    finger = ""
    for w in alpha:
        if w in _FINGER_WORDS:
            finger = _FINGER_WORDS[w]
            break
    if not finger and alpha and alpha[-1] == "finger" and numbers and numbers[0] in _MH_FINGER and side:
        finger = _MH_FINGER[numbers[0]]                      # MakeHuman finger1-1.L
    part = ""
    if not finger:
        part = _PART_WORDS.get(word, "")
        if not part and word.startswith("hand") and word[4:] in _FINGER_WORDS:
            finger = _FINGER_WORDS[word[4:]]
    if part == "hips" and side:
        part = "hip_joint"                                   # pelvis.L / LHip: side bones of the pelvis
    return NameInfo(side, word, numbers, part, finger, helper, priority)


__all__ = ["NameInfo", "analyse_name"]
