"""The canonical humanoid: the bone names every bone map points to, and how they group into limbs.

Names follow the VRM humanoid list in snake_case. A bone map is ``{canonical name: bone name}``.
"""

from __future__ import annotations

SIDES = ("left", "right")

#: Core bones, parent before child (the canonical tree order).
CORE_BONES = (
    "hips", "spine", "chest", "upper_chest", "neck", "head",
    "left_shoulder", "left_upper_arm", "left_lower_arm", "left_hand",
    "right_shoulder", "right_upper_arm", "right_lower_arm", "right_hand",
    "left_upper_leg", "left_lower_leg", "left_foot", "left_toes",
    "right_upper_leg", "right_lower_leg", "right_foot", "right_toes",
)

FINGERS = ("thumb", "index", "middle", "ring", "little")
#: Optional finger bones: ``left_index_1`` (proximal) .. ``left_index_3`` (distal).
FINGER_BONES = tuple(f"{s}_{f}_{k}" for s in SIDES for f in FINGERS for k in (1, 2, 3))

CANONICAL_BONES = CORE_BONES + FINGER_BONES

#: Canonical parent of each canonical bone (None for hips). Optional bones in between may be unmapped.
CANONICAL_PARENT = {
    "hips": None, "spine": "hips", "chest": "spine", "upper_chest": "chest", "neck": "upper_chest",
    "head": "neck",
}
for _s in SIDES:
    CANONICAL_PARENT.update({
        f"{_s}_shoulder": "upper_chest", f"{_s}_upper_arm": f"{_s}_shoulder", f"{_s}_lower_arm": f"{_s}_upper_arm",
        f"{_s}_hand": f"{_s}_lower_arm", f"{_s}_upper_leg": "hips", f"{_s}_lower_leg": f"{_s}_upper_leg",
        f"{_s}_foot": f"{_s}_lower_leg", f"{_s}_toes": f"{_s}_foot",
    })
    for _f in FINGERS:
        CANONICAL_PARENT[f"{_s}_{_f}_1"] = f"{_s}_hand"
        CANONICAL_PARENT[f"{_s}_{_f}_2"] = f"{_s}_{_f}_1"
        CANONICAL_PARENT[f"{_s}_{_f}_3"] = f"{_s}_{_f}_2"

#: The four torso bones (one limb, ``limb_of``; one shared axial map in the body fit and the re-proportioning).
TORSO_BONES = ("hips", "spine", "chest", "upper_chest")

#: Canonical bone -> the canonical bone whose head ends it (its length and axis): the spine chain
#: hips -> spine -> chest -> upper_chest -> neck -> head, the arm and leg chains (a hand ends at its middle
#: finger, a foot at its toes) and the finger chains. Chain ends (head, toes, distal phalanges) have no entry.
CHAIN_CHILD = {"hips": "spine", "spine": "chest", "chest": "upper_chest", "upper_chest": "neck", "neck": "head"}
for _s in SIDES:
    CHAIN_CHILD.update({f"{_s}_shoulder": f"{_s}_upper_arm", f"{_s}_upper_arm": f"{_s}_lower_arm",
                        f"{_s}_lower_arm": f"{_s}_hand", f"{_s}_hand": f"{_s}_middle_1",
                        f"{_s}_upper_leg": f"{_s}_lower_leg", f"{_s}_lower_leg": f"{_s}_foot",
                        f"{_s}_foot": f"{_s}_toes"})
    for _f in FINGERS:
        CHAIN_CHILD[f"{_s}_{_f}_1"] = f"{_s}_{_f}_2"
        CHAIN_CHILD[f"{_s}_{_f}_2"] = f"{_s}_{_f}_3"

#: Bones a retarget cannot do without.
REQUIRED_BONES = ("hips", "spine", "head", "left_upper_arm", "left_lower_arm", "left_hand",
                  "right_upper_arm", "right_lower_arm", "right_hand", "left_upper_leg", "left_lower_leg",
                  "left_foot", "right_upper_leg", "right_lower_leg", "right_foot")

#: Body limbs used by the key-vertex transfer (left and right separate).
LIMBS = ("torso", "head", "left_arm", "right_arm", "left_hand", "right_hand",
         "left_leg", "right_leg", "left_foot", "right_foot")


def limb_of(canonical: str) -> str:
    """Limb of a canonical bone name (``left_index_2`` -> ``left_hand``)."""
    if canonical in TORSO_BONES:
        return "torso"
    if canonical in ("neck", "head"):
        return "head"
    side, _, part = canonical.partition("_")
    if part in ("shoulder", "upper_arm", "lower_arm"):
        return f"{side}_arm"
    if part in ("upper_leg", "lower_leg"):
        return f"{side}_leg"
    if part in ("foot", "toes"):
        return f"{side}_foot"
    if part == "hand" or part.split("_")[0] in FINGERS:
        return f"{side}_hand"
    raise KeyError(f"'{canonical}' is not a canonical humanoid bone")


def unsided(name: str) -> str:
    """``left_hand`` -> ``hand``: a canonical name without its side; names without a side are returned unchanged."""
    return name.removeprefix("left_").removeprefix("right_")


def mirror_name(name: str) -> str:
    """``left_hand`` <-> ``right_hand``; names without a side are returned unchanged."""
    if name.startswith("left_"):
        return "right_" + name[5:]
    if name.startswith("right_"):
        return "left_" + name[6:]
    return name
