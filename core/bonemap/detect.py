"""Automatic humanoid bone mapping by names and topology (docs/bone_mapping.md).

A bone map is ``{canonical name: bone name}`` with canonical names from ``core.rig.humanoid``; it is the input every
ReConForM step assumes given (ReConForM §3). ``detect_bone_map`` works in three passes:

1. **Names** (``core.bonemap.names``): side and part word of each bone.
2. **Anchors and chains.** Head, hands and feet come from names when possible, else from the tree and the
   rest pose in world space (lowest leaves = feet, highest central chain = head, widest leaves = hands).
   Hips = lowest common ancestor of both feet and the head; the spine chain is the path hips -> head,
   the arm and leg chains are the paths to the hands and feet. Canonical bones are picked along each path by
   name, else by position along the chain, so unusual names still map.
3. **Extras.** Toes and fingers by name inside the foot and hand subtrees (toes also by the tree).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..rig.humanoid import CANONICAL_BONES, REQUIRED_BONES, SIDES
from ..types import Skeleton
from .names import _ROOT_WORDS, analyse_name
from .tree import BoneTree


class BoneMapResult(NamedTuple):
    """Result of :func:`detect_bone_map`.

    bone_map: {canonical name: bone name}; unmapped: bone names no canonical bone points to (tree order);
    rig_type: detected rig family (``mixamo``, ``unreal``, ``rigify``, ``metarig``, ``makehuman``, ``cmu``,
    ``daz``, ``bandai``, ``vrm``, ``character_creator`` or ``generic``); missing_required: REQUIRED_BONES
    not found.
    """

    bone_map: dict
    unmapped: list
    rig_type: str
    missing_required: list


def _pick(cands, infos, tree):
    """Best of several bones for the same role: deform > plain > ORG, then shallowest, then first."""
    if not cands:
        return -1
    return min(cands, key=lambda j: (-infos[j].priority, tree.depth[j], j))


# --------------------------------------------------------------------------------------------------------------
# Detection

def _rig_type(names, infos) -> str:
    n = set(names)
    low = {x.lower() for x in names}
    if any(re.match(r"^mixamorig\d*:", x) for x in names):
        return "mixamo"
    if any(x.startswith("J_Bip_") for x in names):
        return "vrm"
    if any(x.startswith("CC_Base_") for x in names):
        return "character_creator"
    if any(x.startswith("DEF-") for x in names):
        return "rigify"
    if {"pelvis", "spine_01", "thigh_l", "upperarm_l"} <= low:
        return "unreal"
    if {"spine.001", "upper_arm.L", "thigh.L"} <= n:
        return "metarig"
    if any(re.match(r"^(upperleg|lowerarm|upperarm)0\d", x.lower()) for x in names) or "spine05" in low:
        return "makehuman"
    if {"LHipJoint", "LowerBack"} & n or "LeftUpLeg" in n and "LeftForeArm" in n and "Spine1" in n:
        return "mixamo" if "LeftHandIndex2" in n and "LHipJoint" not in n else "cmu"
    if {"lShldr", "lThigh", "abdomen"} <= n:
        return "daz"
    if {"UpperArm_L", "LowerLeg_L"} <= n:
        return "bandai"
    return "generic"


def _named(infos, tree, part, side, within=None):
    """Non-helper bones whose name says ``part`` on ``side`` (optionally inside a subtree)."""
    out = [j for j, i in enumerate(infos)
           if i.part == part and i.side == side and not i.helper and (within is None or j in within)]
    return out


def _leaves(tree, infos, bones):
    """Bones of ``bones`` without a non-helper child."""
    return [j for j in bones if not any(not infos[c].helper for c in tree.children[j])]


def _lowest_leaf_pair(tree, infos, usable):
    """Feet by geometry: the lowest leaf, then the lowest leaf of another branch that splits high up."""
    leaves = sorted(_leaves(tree, infos, usable), key=lambda j: tree.pos[j, 2])
    if len(leaves) < 2:
        return -1, -1
    a = leaves[0]
    zmin = tree.pos[a, 2]
    height = max(float(np.ptp(tree.pos[:, 2])), 1e-9)
    for b in leaves[1:]:
        r = tree.lca(a, b)
        if r >= 0 and r not in (a, b) and tree.pos[r, 2] - zmin > 0.25 * height and \
                tree.pos[b, 2] - zmin < 0.15 * height:
            return a, b
    return a, -1


def _foot_on_path(tree, path):
    """The ankle: the bone where the last long, mostly vertical segment (the shin) of the path ends."""
    pts = tree.pos[path]
    seg = np.diff(pts, axis=0)
    n = np.linalg.norm(seg, axis=1)
    if not len(n):
        return path[-1]
    vertical = (np.abs(seg[:, 2]) > 0.7 * np.maximum(n, 1e-12)) & (n > 0.25 * n.max())
    ks = np.nonzero(vertical)[0]
    return path[int(ks[-1]) + 1] if len(ks) else path[-1]


def _fraction_picks(tree, origin, path, fractions):
    """For each fraction f, the path bone whose head lies nearest to f of the chain length from ``origin``.

    Returns increasing indices into ``path``, or None when the path is too short.
    """
    if len(path) < len(fractions):
        return None
    pts = np.vstack([tree.pos[origin][None], tree.pos[path]])
    cum = np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))
    total = cum[-1] if cum[-1] > 1e-9 else 1.0
    out, lo = [], 0
    for n, f in enumerate(fractions):
        hi = len(path) - (len(fractions) - n - 1)           # leave room for the next picks
        k = min(range(lo, hi), key=lambda i: abs(cum[i] / total - f))
        out.append(k)
        lo = k + 1
    return out


def _leg_picks(tree, origin, path, end):
    """Upper leg = first bone going mostly down; lower leg = the later bone nearest mid-height to the ankle."""
    for k, j in enumerate(path):
        nxt = tree.pos[path[k + 1]] if k + 1 < len(path) else tree.pos[end]
        seg = nxt - tree.pos[j]
        if np.linalg.norm(seg) > 1e-9 and -seg[2] > 0.8 * np.linalg.norm(seg) and k + 1 < len(path):
            mid = 0.5 * (tree.pos[j, 2] + tree.pos[end, 2])
            m = min(range(k + 1, len(path)), key=lambda i: abs(tree.pos[path[i], 2] - mid))
            return [k, m]
    return _fraction_picks(tree, origin, path, (0.12, 0.55))


def _limb(tree, infos, origin, end, parts, picker):
    """Pick ``parts`` (root-most first) on the path origin -> end (end excluded).

    By name first (first matching bone in path order, order increasing); the rest by ``picker(path)``
    (indices into the path, one per part) where they keep the order with the named ones.
    """
    path = tree.path(origin, end)[:-1]
    path = [j for j in path if not infos[j].helper] or path
    if not path:
        return {}
    by_name, last = {}, -1
    for part in parts:
        for k, j in enumerate(path):
            if k > last and infos[j].part == part:
                by_name[part] = k
                last = k
                break
    geo = picker(path) if len(by_name) < len(parts) else None
    out = {p: path[k] for p, k in by_name.items()}
    if geo is not None:
        for n, part in enumerate(parts):
            if part in by_name:
                continue
            k = geo[n]
            before = [by_name[p] for p in parts[:n] if p in by_name]
            after = [by_name[p] for p in parts[n + 1:] if p in by_name]
            if (not before or k > max(before)) and (not after or k < min(after)) and path[k] not in out.values():
                out[part] = path[k]
    return out


def detect_bone_map(skeleton: Skeleton) -> BoneMapResult:
    """Map a humanoid skeleton onto the canonical humanoid (``core.rig.humanoid``), by names and topology.

    Never raises for an incomplete result: bones it cannot find are listed in ``missing_required``.
    """
    tree = BoneTree(skeleton)
    names = skeleton.names
    infos = [analyse_name(n) for n in names]
    usable = [j for j in range(tree.J) if not infos[j].helper]
    rig = _rig_type(names, infos)
    bmap: dict = {}

    # ---- feet ---------------------------------------------------------------------------------------------
    feet = {}
    for side in SIDES:
        c = _named(infos, tree, "foot", side)
        if c:
            feet[side] = _pick(c, infos, tree)
    if not feet:
        a, b = _lowest_leaf_pair(tree, infos, usable)
        if a >= 0 and b >= 0:
            r = tree.lca(a, b)
            fa = _foot_on_path(tree, [r] + tree.path(r, a))
            fb = _foot_on_path(tree, [r] + tree.path(r, b))
            left = _left_axis(tree, fa, fb)
            sa = "left" if (tree.pos[fa] - tree.pos[fb]) @ left > 0 else "right"
            feet = {sa: fa, ("right" if sa == "left" else "left"): fb}
    if len(feet) < 2:
        return _result(skeleton, bmap, rig)
    # ---- where each leg ends: its foot, or the shin of a foot that does not hang from it (IK feet) -----------
    ends = _leg_ends(tree, infos, feet)
    # ---- hips = lowest common ancestor of the legs (and of a named head) ----------------------------------
    hips = tree.lca(ends["left"], ends["right"])
    named_heads = _named(infos, tree, "head", "")
    if hips >= 0 and named_heads:
        h = _pick(named_heads, infos, tree)
        if not tree.is_ancestor(hips, h):                   # Character Creator: Hip -> Pelvis -> thighs
            hips = tree.lca(ends["left"], ends["right"], h)
    if hips >= 0 and (infos[hips].word in _ROOT_WORDS or infos[hips].helper):
        inside = [j for j in _named(infos, tree, "hips", "") if tree.is_ancestor(hips, j)
                  and all(tree.is_ancestor(j, e) for e in ends.values())]
        if inside:
            hips = _pick(inside, infos, tree)
    if hips < 0:
        return _result(skeleton, bmap, rig)
    bmap["hips"] = hips
    leg_bones = set()
    for side, f in feet.items():
        leg_bones.update(tree.path(hips, ends[side]) if tree.is_ancestor(hips, ends[side]) else [])
        leg_bones.update(tree.descendants(f))
    # ---- hands, head -----------------------------------------------------------------------------------------
    hands = {}
    for side in SIDES:
        c = [j for j in _named(infos, tree, "hand", side) if tree.is_ancestor(hips, j) and j not in leg_bones]
        if c:
            hands[side] = _pick(c, infos, tree)
    if len(hands) < 2:
        hands = _hands_by_tree(tree, infos, hips, leg_bones, feet) or hands
    branch = tree.lca(hands["left"], hands["right"]) if len(hands) == 2 else -1
    heads = [j for j in named_heads if tree.is_ancestor(hips, j) and j != hips]
    head = _pick(heads, infos, tree)
    if head < 0:
        head = _head_by_tree(tree, infos, hips, branch, leg_bones, hands)
    if head >= 0:
        bmap["head"] = head
    # ---- spine chain -------------------------------------------------------------------------------------------
    spine_path = tree.path(hips, head)[:-1] if head >= 0 else []
    if branch >= 0 and branch in spine_path:
        torso = spine_path[:spine_path.index(branch) + 1]
        neckpart = spine_path[spine_path.index(branch) + 1:]
    else:
        necks = [k for k, j in enumerate(spine_path) if infos[j].part == "neck"]
        cut = necks[0] if necks else max(len(spine_path) - 1, 1)
        torso, neckpart = spine_path[:cut], spine_path[cut:]
    torso = [j for j in torso if not infos[j].helper]
    if neckpart:
        bmap["neck"] = neckpart[0]
    n = len(torso)
    if n == 1:
        bmap["spine"] = torso[0]
    elif n == 2:
        bmap["spine"], bmap["chest"] = torso
    elif n >= 3:
        bmap["spine"], bmap["chest"], bmap["upper_chest"] = torso[0], torso[(n - 1) // 2 if n > 3 else 1], torso[-1]
    # ---- arms ----------------------------------------------------------------------------------------------------
    for side, hand in hands.items():
        origin = branch if branch >= 0 and tree.is_ancestor(branch, hand) else hips
        got = _limb(tree, infos, origin, hand, ("shoulder", "upper_arm", "lower_arm"),
                    lambda path, o=origin: _fraction_picks(tree, o, path, (0.08, 0.3, 0.65))
                    or ([None] + (_fraction_picks(tree, o, path, (0.3, 0.65)) or [None, None])))
        for part, j in got.items():
            if j is not None:
                bmap[f"{side}_{part}"] = j
        bmap[f"{side}_hand"] = hand
        _fingers(tree, infos, hand, side, bmap)
    # ---- legs ----------------------------------------------------------------------------------------------------
    for side, foot in feet.items():
        end = ends[side]
        if end == hips or not tree.is_ancestor(hips, end):
            continue
        if end == foot:
            got = _limb(tree, infos, hips, foot, ("upper_leg", "lower_leg"),
                        lambda path, f=foot: _leg_picks(tree, hips, path, f))
        else:                                         # the foot hangs elsewhere: the chain ends at the shin
            chain = [j for j in tree.path(hips, end) if not infos[j].helper]
            uppers = [j for j in chain[:-1] if infos[j].part == "upper_leg"]
            got = {"lower_leg": end}
            if uppers or len(chain) >= 2:
                got["upper_leg"] = uppers[0] if uppers else chain[-2]
        for part, j in got.items():
            bmap[f"{side}_{part}"] = j
        bmap[f"{side}_foot"] = foot
        toes = [j for j in _named(infos, tree, "toes", side, set(tree.descendants(foot))) if j != foot]
        if toes:
            bmap[f"{side}_toes"] = _pick(toes, infos, tree)
        else:
            kids = [c for c in tree.children[foot] if not infos[c].helper and infos[c].part in ("", "toes")]
            if kids:                                  # the plain child reaching farthest forward-ish: the toe
                off = tree.pos[kids] - tree.pos[foot]
                k = int(np.argmax(np.linalg.norm(off[:, :2], axis=1)))
                if np.linalg.norm(off[k, :2]) > abs(off[k, 2]):
                    bmap[f"{side}_toes"] = kids[k]
    for side in SIDES:                                # rigs without clavicles
        if bmap.get(f"{side}_shoulder") == branch:
            del bmap[f"{side}_shoulder"]
    return _result(skeleton, bmap, rig)


def _leg_ends(tree, infos, feet) -> dict:
    """{side: the bone each leg chain ends at}: the foot itself when it hangs from its leg, else (game rigs whose
    deforming feet are IK bones parented to the root) the shin above it: a bone named as a lower leg on that
    side, else by position: the lowest bone head above the ankle and within a short horizontal reach of it, off
    the foot's own branch."""
    lca = tree.lca(feet["left"], feet["right"])
    height = max(float(np.ptp(tree.pos[:, 2])), 1e-9)
    ends = dict(feet)
    for side, foot in feet.items():
        above = tree.path(lca, foot)[:-1] if lca >= 0 else []
        if any(infos[j].part in ("upper_leg", "lower_leg") for j in above) or \
                sum(not infos[j].helper for j in above) >= 2:
            continue                                  # a leg chain leads to the foot: it hangs from its leg
        own = set(tree.ancestors(foot)) | set(tree.descendants(foot))
        named = [j for j in _named(infos, tree, "lower_leg", side) if j not in own]
        if named:
            ends[side] = _pick(named, infos, tree)
            continue
        d = tree.pos - tree.pos[foot]
        reach = np.linalg.norm(d[:, :2], axis=1)
        cands = [j for j in range(tree.J) if j not in own and not infos[j].helper and infos[j].side != (
                 "right" if side == "left" else "left") and 0.1 * height < d[j, 2] < 0.45 * height
                 and reach[j] < 0.12 * height]
        if cands:
            ends[side] = min(cands, key=lambda j: d[j, 2])
    if ends["left"] == ends["right"]:
        return dict(feet)
    return ends


def _left_axis(tree, foot_a, foot_b):
    """World left axis from the feet: forward = mean ankle -> toe direction, left = up x forward."""
    fwd = np.zeros(3)
    for f in (foot_a, foot_b):
        for c in tree.children[f]:
            fwd += tree.pos[c] - tree.pos[f]
    fwd[2] = 0.0
    if np.linalg.norm(fwd) < 1e-9:
        fwd = np.array([0.0, -1.0, 0.0])       # Blender convention: characters face -Y
    fwd /= np.linalg.norm(fwd)
    return np.cross([0.0, 0.0, 1.0], fwd)


def _hands_by_tree(tree, infos, hips, leg_bones, feet):
    """Hands by topology: the leaves farthest to the left and right, walked back to where fingers branch."""
    left = tree.pos[feet["left"]] - tree.pos[feet["right"]]
    left[2] = 0.0
    if np.linalg.norm(left) < 1e-9:
        return {}
    left /= np.linalg.norm(left)
    cands = _leaves(tree, infos, [j for j in tree.descendants(hips) if j not in leg_bones and not infos[j].helper])
    if len(cands) < 2:
        return {}
    out = {}
    for side, sign in (("left", 1.0), ("right", -1.0)):
        tip = max(cands, key=lambda j: sign * (tree.pos[j] - tree.pos[hips]) @ left)
        out[side] = tip
    if out["left"] == out["right"]:
        return {}
    branch = tree.lca(out["left"], out["right"])
    for side, tip in list(out.items()):
        path = tree.path(branch, tip)                 # arm root .. tip
        reach = np.linalg.norm(tree.pos[tip] - tree.pos[path[0]])
        hand = tip
        for j in path:
            far = np.linalg.norm(tree.pos[j] - tree.pos[path[0]]) > 0.5 * reach
            if far and len([c for c in tree.children[j] if not infos[c].helper]) >= 2:
                hand = j                              # where the fingers branch
                break
        out[side] = hand
    return out


def _head_by_tree(tree, infos, hips, branch, leg_bones, hands):
    """Head by topology: from the arms' branch bone, follow the chain that reaches highest; the head is where
    that chain splits (eyes, face) or its last bone."""
    start = branch if branch >= 0 else hips
    arm_bones = set()
    for h in hands.values():
        arm_bones.update(tree.path(start, h) if tree.is_ancestor(start, h) else [])
    cands = [j for j in tree.descendants(start) if j not in leg_bones and j not in arm_bones and j != start
             and not infos[j].helper]
    if not cands:
        return -1
    top = max(cands, key=lambda j: tree.pos[j, 2])
    path = tree.path(start, top)
    for j in path[1:]:
        if len([c for c in tree.children[j] if not infos[c].helper]) >= 2:
            return j
    return path[-1]


def _fingers(tree, infos, hand, side, bmap):
    sub = tree.descendants(hand)
    by_finger = {}
    for j in sub:
        i = infos[j]
        if j != hand and i.finger and not i.helper:
            by_finger.setdefault(i.finger, []).append(j)
    for finger, bones in by_finger.items():
        bones = sorted(bones, key=lambda j: (tree.depth[j], j))
        # keep one chain: each next bone must descend from the previous one
        chain = [bones[0]]
        for j in bones[1:]:
            if tree.is_ancestor(chain[-1], j) and tree.depth[j] > tree.depth[chain[-1]]:
                chain.append(j)
        for k, j in enumerate(chain[:3]):
            bmap[f"{side}_{finger}_{k + 1}"] = j


def _result(skeleton, bmap_idx, rig):
    names = skeleton.names
    bone_map = {c: names[bmap_idx[c]] for c in CANONICAL_BONES if c in bmap_idx}
    used = set(bone_map.values())
    unmapped = [n for n in names if n not in used]
    missing = [c for c in REQUIRED_BONES if c not in bone_map]
    return BoneMapResult(bone_map, unmapped, rig, missing)


__all__ = ["BoneMapResult", "detect_bone_map"]
