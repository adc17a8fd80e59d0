"""Build the embedded demo scene: generated skinned humanoids and source motions keyframed by code.

    python tools/make_demo_scene.py --out demo_output/demo.blend

Characters (core.body): 'Source' (neutral body, T-pose rest), 'TallThin' (1.95 m, A-pose rest) and
'ShortHeavy' (1.55 m, big belly, T-pose rest). The source motion (30 fps, ~7 s) has floor contacts and
self-contacts: two steps forward, a clap (hands touch three times), hands on hips, a squat with arms forward.
A couple, 'Lead' (1.78 m) and 'Follow' (1.66 m), face each other (4 s): the lead's right hand holds the follow's
left hand, the lead's left hand rests on the follow's right shoulder, and they step sideways together and back;
'Giant' (2.05 m, A-pose rest) and 'Child' (1.30 m) receive them together (tools/demo.py).
It is keyed on every frame from a small IK rig written here (two-bone IK for arms and legs, flat feet).
Nothing here is a third-party asset: bodies and motion come from the project's own code.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from core.body import SHORT_HEAVY, TALL_THIN, BodyParams, make_body  # noqa: E402
from core.rotations import matrix_to_quat, quat_between, quat_make_continuous, quat_to_matrix  # noqa: E402
from core.types import Motion, Skeleton, SkinnedMesh  # noqa: E402

FPS = 30
LEFT = np.array([1.0, 0.0, 0.0])
FORWARD = np.array([0.0, -1.0, 0.0])
UP = np.array([0.0, 0.0, 1.0])

#: (object name, body parameters, rest pose, x offset in the scene)
CHARACTERS = (("Source", BodyParams(name="source"), "T", 0.0),
              ("TallThin", TALL_THIN, "A", 1.2),
              ("ShortHeavy", SHORT_HEAVY, "T", 2.4))
#: the couple (two sources who touch) and the partners of very different sizes they are retargeted onto together:
#: (object name, body parameters, rest pose, (x, y) in the scene, turn about Z in degrees)
COUPLE = (("Lead", BodyParams(name="lead", height=1.78), "T", (-3.0, 0.0), 0.0),
          ("Follow", BodyParams(name="follow", height=1.66, shoulder_width=0.92, hip_width=1.08), "T",
           (-3.0, -0.62), 180.0))
PARTNERS = (("Giant", BodyParams(name="giant", height=2.05, torso_width=1.15, torso_depth=1.1, limb_thickness=1.15),
             "A", (-5.0, 0.0), 0.0),
            ("Child", BodyParams(name="child", height=1.3, head_size=1.12, leg_length=0.92, arm_length=0.95), "T",
             (-6.2, 0.0), 0.0))


# ------------------------------------------------------------------------------------------- motion (numpy)

def _rot_axis(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return quat_to_matrix(np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis]))


def two_bone_ik(root, target, a, b, pole):
    """Elbow/knee position for a chain root -a- mid -b- end reaching ``target`` and bending towards ``pole``."""
    d_vec = target - root
    d = float(np.clip(np.linalg.norm(d_vec), 1e-6, (a + b) * 0.9995))
    u = d_vec / max(np.linalg.norm(d_vec), 1e-9)
    x = (a * a - b * b + d * d) / (2 * d)
    h = np.sqrt(max(a * a - x * x, 0.0))
    p = pole - (pole @ u) * u
    p = p / max(np.linalg.norm(p), 1e-9)
    return root + x * u + h * p, root + d * u


class Rig:
    """Pose helper on a canonical skeleton (armature = world): world rotations -> local basis rotations."""

    def __init__(self, skeleton: Skeleton, mesh: SkinnedMesh):
        self.s = skeleton
        self.G = skeleton.rest_global
        self.idx = {n: i for i, n in enumerate(skeleton.names)}
        self.pos = self.G[:, :3, 3]
        self.rot = self.G[:, :3, :3]
        p = lambda n: self.pos[self.idx[n]]
        self.len = {}
        for s in ("left", "right"):
            self.len[f"{s}_arm"] = (np.linalg.norm(p(f"{s}_lower_arm") - p(f"{s}_upper_arm")),
                                    np.linalg.norm(p(f"{s}_hand") - p(f"{s}_lower_arm")))
            self.len[f"{s}_leg"] = (np.linalg.norm(p(f"{s}_lower_leg") - p(f"{s}_upper_leg")),
                                    np.linalg.norm(p(f"{s}_foot") - p(f"{s}_lower_leg")))
        hz = p("hips")[2]
        band = mesh.rest_verts[np.abs(mesh.rest_verts[:, 2] - hz) < 0.04]
        self.hip_half_width = float(np.abs(band[:, 0]).max())
        front = mesh.rest_verts[np.abs(mesh.rest_verts[:, 2] - p("chest")[2]) < 0.05]
        self.chest_front = float(-front[:, 1].max() if len(front) else 0.15)
        self.chest_front = float(np.abs(front[:, 1]).max())

    def p(self, name):
        return self.pos[self.idx[name]].copy()

    def pose(self, hips_pos, lean, targets):
        """Local basis (J, 4) and hips location (3,) for: hips at ``hips_pos``, torso leaning forward by ``lean``
        radians, and limb ``targets`` {'left_arm': (wrist, pole), 'left_leg': (ankle, pole), ...}."""
        s = self.s
        J = s.num_bones
        W = np.empty((J, 3, 3))
        P = np.empty((J, 3))
        tilt = _rot_axis(LEFT, lean)            # rotation about +X tips the top forward (-Y)
        desired = {"hips": tilt @ self.rot[self.idx["hips"]]}
        for k, name in enumerate(("spine", "chest", "upper_chest")):
            if name in self.idx:
                desired[name] = _rot_axis(LEFT, lean * 0.35 * (k + 1)) @ tilt @ self.rot[self.idx[name]]
        for name in ("neck", "head"):
            if name in self.idx:
                desired[name] = _rot_axis(LEFT, -lean * 0.5) @ _rot_axis(LEFT, lean * (1 + 0.35 * 3)) @ \
                    self.rot[self.idx[name]]
        basis = np.empty((J, 3, 3))
        for j, par in enumerate(s.parents):
            n = s.names[j]
            frame = (np.eye(3) if par < 0 else W[par]) @ s.rest_local[j, :3, :3]
            P[j] = hips_pos if par < 0 else P[par] + W[par] @ s.rest_local[j, :3, 3]
            limb = None
            for side in ("left", "right"):
                if n in (f"{side}_upper_arm", f"{side}_upper_leg"):
                    limb = (side, "arm" if "arm" in n else "leg")
            if limb is not None and f"{limb[0]}_{limb[1]}" in targets:
                side, kind = limb
                mid, end = (f"{side}_lower_arm", f"{side}_hand") if kind == "arm" else \
                    (f"{side}_lower_leg", f"{side}_foot")
                tgt, pole = targets[f"{side}_{kind}"]
                a, b = self.len[f"{side}_{kind}"]
                elbow, wrist = two_bone_ik(P[j], np.asarray(tgt, float), a, b, np.asarray(pole, float))
                d0 = self.p(mid) - self.p(n)
                desired[n] = quat_to_matrix(quat_between(d0, elbow - P[j])) @ self.rot[j]
                d1 = self.p(end) - self.p(mid)
                desired[mid] = quat_to_matrix(quat_between(d1, wrist - elbow)) @ self.rot[self.idx[mid]]
            if n in ("left_foot", "right_foot"):
                desired[n] = self.rot[j]         # flat feet: rest world orientation
            if n in desired:
                W[j] = desired[n]
                basis[j] = frame.T @ W[j]
            else:
                basis[j] = np.eye(3)
                W[j] = frame
        hips_loc = s.rest_local[0, :3, :3].T @ (hips_pos - s.rest_local[0, :3, 3])
        return matrix_to_quat(basis), hips_loc


def _smooth(keys, t):
    """Piecewise smoothstep interpolation of {frame: value} at frame t (values: arrays or floats)."""
    frames = sorted(keys)
    if t <= frames[0]:
        return np.asarray(keys[frames[0]], float)
    if t >= frames[-1]:
        return np.asarray(keys[frames[-1]], float)
    k = np.searchsorted(frames, t) - 1
    f0, f1 = frames[k], frames[k + 1]
    u = (t - f0) / (f1 - f0)
    u = u * u * (3 - 2 * u)
    return (1 - u) * np.asarray(keys[f0], float) + u * np.asarray(keys[f1], float)


def demo_motion(skeleton: Skeleton, mesh: SkinnedMesh):
    """The demo clip on the source character: (Motion, events {name: (first, last) frame})."""
    rig = Rig(skeleton, mesh)
    H0 = rig.p("hips")
    ankle = {s: rig.p(f"{s}_foot") for s in ("left", "right")}
    shoulder = {s: rig.p(f"{s}_upper_arm") for s in ("left", "right")}
    la = {s: sum(rig.len[f"{s}_arm"]) for s in ("left", "right")}
    sign = {"left": 1.0, "right": -1.0}
    stride = 0.32
    hips_h = H0[2] - ankle["left"][2]
    # --- controls keyed on frames --------------------------------------------------------------------------
    hips = {0: H0 - [0, 0, 0.015], 20: H0 - [0, 0, 0.02], 35: H0 + [0, -stride / 2, -0.03], 50: H0 + [0, -stride, -0.02],
            65: H0 + [0, -1.5 * stride, -0.03], 80: H0 + [0, -2 * stride, -0.02]}
    foot = {"left": {0: ankle["left"], 35: ankle["left"], 50: ankle["left"] + [0, -2 * stride, 0],
                     80: ankle["left"] + [0, -2 * stride, 0]},
            "right": {0: ankle["right"], 20: ankle["right"], 35: ankle["right"] + [0, -stride, 0],
                      65: ankle["right"] + [0, -stride, 0], 80: ankle["right"] + [0, -2 * stride, 0]}}
    lift = {"right": [(20, 35)], "left": [(35, 50)]}
    lift["right"].append((65, 80))
    end_hips = H0 + [0, -2 * stride, -0.02]
    for f in (95, 110, 120, 150, 160):
        hips[f] = end_hips
    hips[182] = end_hips + [0, 0.06, -0.38 * hips_h]
    hips[195] = end_hips + [0, 0.06, -0.38 * hips_h]
    hips[215] = end_hips
    hips[230] = end_hips
    lean = {0: 0.0, 160: 0.0, 182: 0.45, 195: 0.45, 215: 0.0, 230: 0.0}
    chest_z = rig.p("chest")[2] + 0.05
    front = -(rig.chest_front + 0.22)
    hands = {}
    for s in ("left", "right"):
        down = shoulder[s] + [sign[s] * 0.06, 0.0, -0.97 * la[s]]
        swing = lambda amount: down + [0, amount, 0.02]
        clap_far = np.array([sign[s] * 0.17, front, chest_z])
        clap_touch = np.array([sign[s] * 0.035, front, chest_z])
        on_hip = np.array([sign[s] * (rig.hip_half_width + 0.045), 0.0, H0[2] + 0.06])
        ahead = shoulder[s] + [sign[s] * -0.05, -0.85 * la[s], -0.05]
        hands[s] = {0: down, 20: down, 35: swing(-0.12 * sign[s]), 50: swing(0.12 * sign[s]), 65: swing(-0.1 * sign[s]),
                    80: down, 88: clap_far, 94: clap_touch, 98: clap_far, 102: clap_touch, 106: clap_far,
                    110: clap_touch, 116: clap_far, 126: on_hip, 150: on_hip, 162: down, 180: ahead, 197: ahead,
                    215: down, 230: down}
    events = {"steps": (20, 80), "clap": (88, 116), "hands_on_hips": (126, 150), "squat": (160, 215)}
    T = 231
    rots = np.empty((T, skeleton.num_bones, 4))
    locs = np.zeros((T, skeleton.num_bones, 3))
    for t in range(T):
        hp = _smooth(hips, t)
        hip_offset = hp - H0
        targets = {}
        for s in ("left", "right"):
            hand = _smooth(hands[s], t)
            if t <= 80 or t >= 215:                     # arms hang/swing relative to the moving body
                hand = hand + [0, hip_offset[1], 0]
            else:
                hand = hand + [0, hip_offset[1], 0] if not (160 <= t <= 215) else hand + [0, hip_offset[1], 0]
            pole_arm = (np.array([sign[s] * 0.3, 0.2, -1.0]) if 84 <= t <= 118 else
                        np.array([sign[s] * 1.0, 0.6, 0.0]) if 118 < t < 158 else np.array([0.0, 1.0, -0.3]))
            targets[f"{s}_arm"] = (hand, pole_arm)
            a = _smooth(foot[s], t)
            for f0, f1 in lift[s]:
                if f0 < t < f1:
                    a = a + [0, 0, 0.07 * np.sin(np.pi * (t - f0) / (f1 - f0))]
            targets[f"{s}_leg"] = (a, np.array([sign[s] * 0.15, -1.0, 0.0]))
        q, loc = rig.pose(hp, float(_smooth(lean, t)), targets)
        rots[t] = q
        locs[t, 0] = loc
    return Motion(quat_make_continuous(rots), locs, float(FPS), 1), events


def _object_matrix(xy, turn_deg: float) -> np.ndarray:
    """(4, 4) armature object matrix: a turn about Z, then a move to (x, y, 0)."""
    m = np.eye(4)
    m[:3, :3] = _rot_axis(UP, np.radians(turn_deg))
    m[:2, 3] = xy
    return m


def couple_motion(lead, follow, follow_matrix: np.ndarray, lead_matrix: np.ndarray = None):
    """The couple's clip (30 fps, 4 s): facing each other, the lead's right hand holds the follow's left hand,
    the lead's left hand rests on the follow's right shoulder, and they step sideways together and back.

    Args:
        lead, follow: (Skeleton, SkinnedMesh) of each (armature = the object's local space).
        follow_matrix, lead_matrix: their armature objects' world matrices (the lead's default: identity).
    Returns:
        (lead Motion, follow Motion, events {name: (first, last) frame}).
    """
    lead_matrix = np.eye(4) if lead_matrix is None else lead_matrix
    rigs = {"lead": Rig(*lead), "follow": Rig(*follow)}
    mats = {"lead": lead_matrix, "follow": follow_matrix}
    inv = {k: np.linalg.inv(m) for k, m in mats.items()}
    world = lambda who, p: mats[who][:3, :3] @ p + mats[who][:3, 3]            # noqa: E731
    local = lambda who, p: inv[who][:3, :3] @ np.asarray(p, float) + inv[who][:3, 3]   # noqa: E731
    sign = {"left": 1.0, "right": -1.0}
    T, step = 120, 0.28
    shift = {0: 0.0, 15: 0.0, 40: step, 55: step, 80: 0.0, 119: 0.0}           # both hips, world +X
    lead_shoulder = world("lead", rigs["lead"].p("right_upper_arm"))
    fol_shoulder = world("follow", rigs["follow"].p("left_upper_arm"))
    held = 0.5 * (lead_shoulder + fol_shoulder) + [0.0, 0.0, -0.28]           # the joined hands, at rest shift
    on_shoulder = world("follow", rigs["follow"].p("right_upper_arm")) + [0.0, 0.07, 0.06]
    motions = {}
    for who, rig in rigs.items():
        H0 = rig.p("hips")
        la = {s: sum(rig.len[f"{s}_arm"]) for s in ("left", "right")}
        down = {s: rig.p(f"{s}_upper_arm") + [sign[s] * 0.06, 0.0, -0.97 * la[s]] for s in ("left", "right")}
        # world +X is the lead's left and the follow's right: that foot leads the step out, the other the way back
        out_side = "left" if who == "lead" else "right"
        in_side = "right" if who == "lead" else "left"
        ankle = {s: rig.p(f"{s}_foot") for s in ("left", "right")}
        dx = local(who, world(who, np.zeros(3)) + [step, 0.0, 0.0])            # world +step in this armature
        foot = {out_side: {0: ankle[out_side], 15: ankle[out_side], 28: ankle[out_side] + dx, 55: ankle[out_side] + dx,
                           80: ankle[out_side]},
                in_side: {0: ankle[in_side], 28: ankle[in_side], 40: ankle[in_side] + dx, 55: ankle[in_side] + dx,
                          68: ankle[in_side]}}
        lifts = {out_side: [(15, 28), (68, 80)], in_side: [(28, 40), (55, 68)]}
        rots = np.empty((T, rig.s.num_bones, 4))
        locs = np.zeros((T, rig.s.num_bones, 3))
        for t in range(T):
            sx = float(_smooth(shift, t))
            offset = local(who, world(who, np.zeros(3)) + [sx, 0.0, 0.0])
            hips = H0 + offset - [0.0, 0.0, 0.02]
            join = min(1.0, t / 10.0)
            targets = {}
            for s in ("left", "right"):
                a = _smooth(foot[s], t)
                for f0, f1 in lifts[s]:
                    if f0 < t < f1:
                        a = a + [0.0, 0.0, 0.06 * np.sin(np.pi * (t - f0) / (f1 - f0))]
                targets[f"{s}_leg"] = (a, np.array([sign[s] * 0.15, -1.0, 0.0]))
                if (who, s) == ("lead", "right") or (who, s) == ("follow", "left"):
                    grip = held + [sx, 0.0, 0.0] + (world(who, [0.0, 0.07, 0.0]) - world(who, np.zeros(3)))
                    goal = local(who, grip)
                    pole = np.array([sign[s] * 1.0, 0.3, -0.6])
                elif (who, s) == ("lead", "left"):
                    goal = local(who, on_shoulder + [sx, 0.0, 0.0])
                    pole = np.array([1.0, 0.2, -0.5])
                else:
                    goal = down[s] + offset
                    pole = np.array([0.0, 1.0, -0.3])
                targets[f"{s}_arm"] = ((1 - join) * (down[s] + offset) + join * goal, pole)
            q, loc = rig.pose(hips, 0.05, targets)
            rots[t] = q
            locs[t, 0] = loc
        motions[who] = Motion(quat_make_continuous(rots), locs, float(FPS), 1)
    events = {"hands_joined": (10, T - 1), "hand_on_shoulder": (10, T - 1), "side_steps": (15, 80)}
    return motions["lead"], motions["follow"], events


# ------------------------------------------------------------------------------------------- Blender objects

def build_character(name, skeleton: Skeleton, mesh: SkinnedMesh, x_offset: float):
    """Armature + skinned mesh objects in the current scene; returns the armature object."""
    import bpy
    from mathutils import Matrix

    arm_data = bpy.data.armatures.new(name)
    arm = bpy.data.objects.new(name, arm_data)
    bpy.context.scene.collection.objects.link(arm)
    arm.location = (x_offset, 0.0, 0.0)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    G = skeleton.rest_global
    ebs = []
    for j, n in enumerate(skeleton.names):
        eb = arm_data.edit_bones.new(n)
        kids = skeleton.children(j)
        length = min((np.linalg.norm(G[c, :3, 3] - G[j, :3, 3]) for c in kids), default=0.06)
        eb.head = (0, 0, 0)
        eb.tail = (0, max(length, 0.02), 0)
        eb.matrix = Matrix(G[j].tolist())
        if skeleton.parents[j] >= 0:
            eb.parent = ebs[skeleton.parents[j]]
        ebs.append(eb)
    bpy.ops.object.mode_set(mode='OBJECT')
    me = bpy.data.meshes.new(f"{name}_body")
    sizes = mesh.face_sizes
    faces = np.split(mesh.face_indices, mesh.face_offsets[1:-1]) if len(set(sizes.tolist())) > 1 else \
        mesh.face_indices.reshape(-1, int(sizes[0]))
    me.from_pydata(mesh.rest_verts.tolist(), [], [list(map(int, f)) for f in faces])
    me.update()
    for p in me.polygons:
        p.use_smooth = True
    ob = bpy.data.objects.new(f"{name}_body", me)
    bpy.context.scene.collection.objects.link(ob)
    ob.parent = arm
    groups = [ob.vertex_groups.new(name=n) for n in skeleton.names]
    for v in range(mesh.num_verts):
        for b, w in zip(mesh.weight_bones[v], mesh.weight_values[v]):
            if w > 0:
                groups[int(b)].add([v], float(w), 'ADD')
    mod = ob.modifiers.new("Armature", 'ARMATURE')
    mod.object = arm
    return arm


def build_scene(out_path, report=print):
    """Generate the bodies, the source motion, and save the .blend. Returns {'events':..., 'characters':...}."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = FPS
    info = {"characters": {}}
    bodies = {}
    for name, params, pose, x in CHARACTERS:
        skel, mesh, _ = make_body(params, pose=pose)
        bodies[name] = (skel, mesh)
        build_character(name, skel, mesh, x)
        height = float(np.ptp(mesh.rest_verts[:, 2]))
        info["characters"][name] = {"height_m": round(height, 3), "rest_pose": pose, "verts": mesh.num_verts,
                                    "bones": skel.num_bones, "params": params.name}
        report(f"character '{name}': {params.name}, {height:.2f} m, {mesh.num_verts} vertices, {pose}-pose rest")
    for name, params, pose, xy, turn in COUPLE + PARTNERS:
        skel, mesh, _ = make_body(params, pose=pose)
        bodies[name] = (skel, mesh)
        arm = build_character(name, skel, mesh, xy[0])
        arm.location.y = xy[1]
        arm.rotation_euler.z = np.radians(turn)
        height = float(np.ptp(mesh.rest_verts[:, 2]))
        info["characters"][name] = {"height_m": round(height, 3), "rest_pose": pose, "verts": mesh.num_verts,
                                    "bones": skel.num_bones, "params": params.name}
        report(f"character '{name}': {params.name}, {height:.2f} m, {mesh.num_verts} vertices, {pose}-pose rest")
    _, mesh = bodies["Source"]
    src = bpy.data.objects["Source"]
    bridge = _bridge()
    # Key the motion on the armature as Blender built it: its bone rolls need not equal core.body's, and
    # basis rotations are expressed in each bone's own rest frame.
    blender_skel = bridge.read_skeleton(src)
    motion, events = demo_motion(blender_skel, mesh)
    bridge.write_motion(src, blender_skel, motion, "DemoMotion")
    scene.frame_start, scene.frame_end = 1, motion.num_frames
    info["events"] = events
    info["frames"] = motion.num_frames
    # the couple, keyed on the armatures as Blender built them, placed as in the scene
    bpy.context.view_layer.update()
    lead, follow = bpy.data.objects["Lead"], bpy.data.objects["Follow"]
    sk_l, sk_f = bridge.read_skeleton(lead), bridge.read_skeleton(follow)
    m_lead, m_follow, couple_events = couple_motion((_armature_space(sk_l), bodies["Lead"][1]),
                                                    (_armature_space(sk_f), bodies["Follow"][1]),
                                                    np.asarray(follow.matrix_world), np.asarray(lead.matrix_world))
    bridge.write_motion(lead, sk_l, m_lead, "LeadDance")
    bridge.write_motion(follow, sk_f, m_follow, "FollowDance")
    info["couple_events"] = couple_events
    info["couple_frames"] = m_lead.num_frames
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(out_path))
    report(f"saved {out_path} ({motion.num_frames} frames at {FPS} fps)")
    return info


def _armature_space(skeleton: Skeleton) -> Skeleton:
    """``skeleton`` with an identity object matrix (``Rig`` poses in the armature's own space)."""
    import dataclasses
    return dataclasses.replace(skeleton, object_matrix=np.eye(4))


def _bridge():
    import importlib
    return importlib.import_module(f"{_module()}.reconform_addon.bridge")


def _module():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import retarget  # the batch tool: enables the add-on in its real bl_ext namespace
    return retarget.MODULE


def start_blender():
    """Import bpy (the wheel, or the running Blender) with the user's settings kept out of it."""
    if "bpy" not in sys.modules:
        import tempfile
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_bl_"))
    import bpy  # noqa: F401


class Addon:
    """Context manager: the extension enabled in its real bl_ext namespace (same helper as tools/retarget.py)."""

    def __enter__(self):
        start_blender()
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import retarget
        self.retarget = retarget
        self.mod, self.repo = retarget.enable_addon()
        return self

    def __exit__(self, *exc):
        import addon_utils
        import bpy
        addon_utils.disable(self.retarget.MODULE, default_set=True)
        bpy.context.preferences.extensions.repos.remove(self.repo)
        return False


def main(argv=None):
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("demo_output", "demo.blend"))
    args = p.parse_args(argv)
    with Addon():
        build_scene(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
