"""A small synthetic humanoid (canonical skeleton + tube mesh + key vertices) and procedural clips, for the
solver, descriptor and metric tests. No bpy. World = armature space unless ``object_matrix`` is given."""

from __future__ import annotations

import numpy as np

from core.rig.humanoid import limb_of
from core.rig.rotations import quat_multiply, quat_normalize
from core.types import Character, KeyVertexSet, Motion, Skeleton, SkinnedMesh

# canonical bone: (parent, head, tail) at scale 1 (≈ 1.8 m tall); the character faces -Y, its left is +X.
_BONES = {
    "hips": (None, (0, 0, 1.00), (0, 0, 1.10)),
    "spine": ("hips", (0, 0, 1.10), (0, 0, 1.25)),
    "chest": ("spine", (0, 0, 1.25), (0, 0, 1.42)),
    "neck": ("chest", (0, 0, 1.45), (0, 0, 1.55)),
    "head": ("neck", (0, 0, 1.55), (0, 0, 1.72)),
    "left_shoulder": ("chest", (0.04, 0, 1.40), (0.17, 0, 1.42)),
    "left_upper_arm": ("left_shoulder", (0.17, 0, 1.42), (0.45, 0, 1.42)),
    "left_lower_arm": ("left_upper_arm", (0.45, 0, 1.42), (0.70, 0, 1.42)),
    "left_hand": ("left_lower_arm", (0.70, 0, 1.42), (0.86, 0, 1.42)),
    "left_upper_leg": ("hips", (0.10, 0, 0.97), (0.10, 0, 0.52)),
    "left_lower_leg": ("left_upper_leg", (0.10, 0, 0.52), (0.10, 0, 0.09)),
    "left_foot": ("left_lower_leg", (0.10, 0, 0.09), (0.10, -0.12, 0.04)),
    "left_toes": ("left_foot", (0.10, -0.12, 0.04), (0.10, -0.20, 0.04)),
}
for _k in list(_BONES):
    if _k.startswith("left_"):
        par, h, t = _BONES[_k]
        _BONES["right_" + _k[5:]] = ("right_" + par[5:] if par.startswith("left_") else par,
                                     (-h[0], h[1], h[2]), (-t[0], t[1], t[2]))

_RADIUS = {"hips": 0.13, "spine": 0.12, "chest": 0.14, "neck": 0.05, "head": 0.09, "shoulder": 0.05,
           "upper_arm": 0.045, "lower_arm": 0.04, "hand": 0.035, "upper_leg": 0.07, "lower_leg": 0.05,
           "foot": 0.04, "toes": 0.035}


def _radius(name):
    return _RADIUS.get(name, _RADIUS.get(name.split("_", 1)[-1], 0.05))


def _frame(head, tail):
    y = tail - head
    y = y / np.linalg.norm(y)
    ref = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(y, ref)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, z, head
    return m


def make_humanoid(scale=1.0, girth=1.0, leg=1.0, name="synth", ring=8, rows=3, object_matrix=None,
                  prefix=""):
    """A humanoid Character in T-pose at rest (rest pose == T-pose).

    scale: overall size; girth: tube radii factor; leg: leg-length factor (hips move up accordingly).
    Returns a Character with skeleton, mesh (tubes per bone), bone_map, keyverts (2 per bone) and height.
    """
    names = list(_BONES)
    heads, tails = {}, {}
    lift = (leg - 1.0) * 0.93
    for n in names:
        _, h, t = _BONES[n]
        h, t = np.array(h, float), np.array(t, float)
        if "leg" in n or "foot" in n or "toes" in n:
            if "upper_leg" in n:
                h2 = h.copy()
                t2 = h + (t - h) * leg
            elif "lower_leg" in n:
                h2 = np.array([h[0], h[1], (0.97 - (0.97 - h[2]) * leg)])
                t2 = h2 + (t - h) * leg
            else:
                h2, t2 = h.copy(), t.copy()
            heads[n], tails[n] = h2, t2
        else:
            heads[n], tails[n] = h + [0, 0, lift], t + [0, 0, lift]
    # re-chain legs/feet so children start at parent tails
    for side in ("left", "right"):
        heads[f"{side}_upper_leg"] = heads["hips"] + [0.10 if side == "left" else -0.10, 0, -0.03]
        tails[f"{side}_upper_leg"] = heads[f"{side}_upper_leg"] + [0, 0, -0.45 * leg]
        heads[f"{side}_lower_leg"] = tails[f"{side}_upper_leg"]
        tails[f"{side}_lower_leg"] = np.array([heads[f"{side}_lower_leg"][0], 0, 0.09])
        heads[f"{side}_foot"] = tails[f"{side}_lower_leg"]
        tails[f"{side}_foot"] = heads[f"{side}_foot"] + [0, -0.12, -0.05]
        heads[f"{side}_toes"] = tails[f"{side}_foot"]
        tails[f"{side}_toes"] = heads[f"{side}_toes"] + [0, -0.08, 0]
    G = {n: _frame(heads[n] * scale, tails[n] * scale) for n in names}
    parents, rest_local = [], []
    for n in names:
        par = _BONES[n][0]
        parents.append(-1 if par is None else names.index(par))
        rest_local.append(G[n] if par is None else np.linalg.inv(G[par]) @ G[n])
    bone_names = [prefix + n for n in names]
    sk = Skeleton(name, bone_names, parents, np.stack(rest_local),
                  np.eye(4) if object_matrix is None else object_matrix)

    verts, normals, wb, wv, faces = [], [], [], [], []
    kv_ids, kv_names, kv_limbs = [], [], []
    for j, n in enumerate(names):
        h, t = heads[n] * scale, tails[n] * scale
        fr = G[n]
        r = _radius(n) * girth * scale
        base = len(verts)
        par = parents[j]
        for a in range(rows):
            s = (a + 0.5) / rows
            c = h + (t - h) * s
            for k in range(ring):
                ang = 2 * np.pi * k / ring
                d = np.cos(ang) * fr[:3, 0] + np.sin(ang) * fr[:3, 2]
                verts.append(c + r * d)
                normals.append(d)
                if a == 0 and par >= 0:
                    wb.append([j, par])
                    wv.append([0.7, 0.3])
                else:
                    wb.append([j, 0])
                    wv.append([1.0, 0.0])
        for a in range(rows - 1):
            for k in range(ring):
                k2 = (k + 1) % ring
                faces.append([base + a * ring + k, base + a * ring + k2, base + (a + 1) * ring + k2,
                              base + (a + 1) * ring + k])
        # two key vertices: middle ring, two opposite sides
        mid = base + (rows // 2) * ring
        for tag, k in (("a", 0), ("b", ring // 2)):
            kv_ids.append(mid + k)
            kv_names.append(f"{n}_{tag}")
            kv_limbs.append(limb_of(n))
    verts = np.asarray(verts)
    faces = np.asarray(faces, dtype=np.int64)
    mesh = SkinnedMesh(name + "_mesh", verts, np.asarray(normals), faces.ravel(),
                       np.arange(0, faces.size + 1, 4), np.asarray(wb, dtype=np.int64), np.asarray(wv))
    world = verts @ sk.object_matrix[:3, :3].T + sk.object_matrix[:3, 3]
    height = float(world[:, 2].max() - world[:, 2].min())
    kv = KeyVertexSet(kv_names, kv_limbs, np.asarray(kv_ids))
    bone_map = {n: prefix + n for n in names}
    return Character(sk, mesh, bone_map, kv, height)


def _axis_quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    angle = np.asarray(angle, float)[..., None]
    return np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=-1)


def walk_motion(character, frames=60, fps=30.0, stride=0.5, clap=False, seed=0, arms_down=1.2):
    """A procedural walk (legs swing about each bone's local X, knees bend, hips advance along -Y).

    clap: the arms come forward and the hands meet around the middle of the clip (a self-contact).
    Hips height is chosen so the lowest foot point stays near the ground. Returns a Motion.
    """
    sk = character.skeleton
    T, J = frames, sk.num_bones
    t = np.arange(T) / fps
    ph = 2 * np.pi * t * 1.0
    q = np.zeros((T, J, 4))
    q[..., 0] = 1
    bm = character.bone_map
    idx = {c: sk.index(b) for c, b in bm.items()}
    swing = 0.35
    for side, sgn in (("left", 1), ("right", -1)):
        q[:, idx[f"{side}_upper_leg"]] = _axis_quat([1, 0, 0], sgn * swing * np.sin(ph))
        q[:, idx[f"{side}_lower_leg"]] = _axis_quat([1, 0, 0], -0.5 * np.clip(np.sin(ph + sgn * 0.5 * np.pi), 0,
                                                                              None) * (-1))
        # arms down from the T-pose (rotate about the bone's local Z, which is world ±Y-ish for arms)
        arm = _axis_quat([0, 0, 1], -sgn * arms_down * np.ones(T) * (-1))
        if clap:
            w = np.clip(np.sin(np.pi * t / t[-1]) * 1.4, 0, 1)[..., None]
            fwd = _axis_quat([1, 0, 0], -1.2 * w[..., 0])
            arm = quat_normalize(quat_multiply(arm, fwd))
            q[:, idx[f"{side}_lower_arm"]] = _axis_quat([0, 0, 1], sgn * 1.3 * w[..., 0])
        q[:, idx[f"{side}_upper_arm"]] = arm
    loc = np.zeros((T, J, 3))
    rng = np.random.default_rng(seed)
    m = Motion(q, loc, fps, 1)
    # hips advance in world -Y; basis location of a root bone is in its rest frame
    hips = idx["hips"]
    Rrest = sk.rest_local[hips, :3, :3]
    world = np.stack([np.zeros(T), -stride * t, np.zeros(T)], -1)
    m.locations[:, hips] = world @ Rrest  # R^T w for each frame
    # put the lowest point of the feet on the ground at every frame's minimum over the clip
    from core.rig.kinematics import forward_kinematics
    from core.rig.skinning import skin_mesh
    pose = forward_kinematics(sk, m.rotations, m.locations)
    v, _ = skin_mesh(sk, character.mesh, pose)
    low = v.numpy()[..., 2].min(axis=1)
    lift = -np.full(T, low.min()) + 0.0
    world[:, 2] = lift
    m.locations[:, hips] = world @ Rrest
    del rng
    return m


def with_face(character):
    """``character`` with three more key vertices on its head named like the template's (``face_center`` in
    front, ``head_back``, ``head_top``), so that it has an eye and a gaze (core.contacts.gaze)."""
    from dataclasses import replace

    sk, mesh, kv = character.skeleton, character.mesh, character.keyverts
    head = sk.index(character.bone_map["head"])
    ids = np.nonzero((mesh.weight_bones[:, 0] == head) & (mesh.weight_values[:, 0] == 1.0))[0]   # head only
    v = mesh.rest_verts[ids]
    picks = [ids[np.argmin(v[:, 1])], ids[np.argmax(v[:, 1])], ids[np.argmax(v[:, 2])]]
    new = KeyVertexSet(kv.names + ("face_center", "head_back", "head_top"), kv.limbs + ("head",) * 3,
                       np.concatenate([kv.vertex_ids, picks]))
    return replace(character, keyverts=new)


def facing(angle: float, x: float = 0.0, y: float = 0.0) -> np.ndarray:
    """(4, 4) object matrix: a turn of ``angle`` radians about +Z, then a move to (x, y, 0)."""
    c, s = np.cos(angle), np.sin(angle)
    m = np.eye(4)
    m[:2, :2] = [[c, -s], [s, c]]
    m[:2, 3] = (x, y)
    return m


def reach_motion(character, frames=40, fps=30.0):
    """Standing still, both arms swing from the T-pose to straight ahead (horizontal), hold, and back."""
    m = walk_motion(character, frames=frames, fps=fps, stride=0.0, arms_down=0.0)
    idx = {c: character.skeleton.index(b) for c, b in character.bone_map.items()}
    t = np.arange(frames) / max(frames - 1, 1)
    w = np.clip(np.sin(np.pi * t) * 1.6, 0.0, 1.0)                   # 0 -> 1, held, -> 0
    G = character.skeleton.rest_global
    for side, sgn in (("left", 1.0), ("right", -1.0)):
        # a turn about the world's up axis swings the arm forward (-Y); in the bone's own rest frame G (its
        # parent stays at rest) that turn is about Gᵀ·up
        j = idx[f"{side}_upper_arm"]
        m.rotations[:, j] = _axis_quat(G[j, :3, :3].T @ np.array([0.0, 0.0, 1.0]), -sgn * 0.5 * np.pi * w)
    return m


def couple(frames=40, scale_a=1.0, scale_b=1.0, name_a="lead", name_b="follow", gap=None, fps=30.0):
    """Two synthetic humanoids facing each other who join hands (a two-character contact scene in one world
    frame): (A, motion A, B, motion B).

    A stands at the origin facing -Y; B is turned by 180° about Z and stands ``gap`` metres away along -Y (by
    default where, arms straight ahead, its hands stop 3 cm from A's). Both stand still and raise their arms
    straight ahead (``reach_motion``): A's left hand meets B's right hand and A's right hand B's left.
    """
    a = with_face(make_humanoid(scale=scale_a, name=name_a))
    ma = reach_motion(a, frames=frames, fps=fps)
    if gap is None:
        from core.character.track import ClipTrack
        kv = ClipTrack(a, ma).keyverts[0]
        hand = [a.keyverts.names.index(f"{s}_hand_{k}") for s in ("left", "right") for k in "ab"]
        reach_a = -kv[:, hand, 1].min()                       # how far in front of A its hands go
        gap = reach_a * (1.0 + scale_b / scale_a) + 0.03      # the hands stop 3 cm apart
    b = with_face(make_humanoid(scale=scale_b, name=name_b, object_matrix=facing(np.pi, 0.0, -gap)))
    mb = reach_motion(b, frames=frames, fps=fps)
    return a, ma, b, mb
