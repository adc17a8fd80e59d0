"""Build the embedded demo scene: generated skinned humanoids, source motions keyframed by code, and the
grounds of a walk over stairs and up a ramp.

    python tools/make_demo_scene.py --out demo_output/demo.blend

Characters (core.body): 'Source' (neutral body, T-pose rest), 'TallThin' (1.95 m, A-pose rest) and
'ShortHeavy' (1.55 m, big belly, T-pose rest); 'StairsClimber' (the TallThin body) and 'RampWalker' (the
ShortHeavy body) stand at the foot of the ground objects 'Stairs' (8 steps, 17 cm rise, 30 cm tread) and
'Ramp' (15°), both solid (a Solidify modifier: the retarget reads the evaluated mesh). The source motion
'DemoMotion' (30 fps, ~7 s) has floor contacts and self-contacts: two steps forward, a clap (hands touch
three times), hands on hips, a squat with arms forward; 'DemoWalk' (~6 s) is ten steps along -Y on flat
ground. Both are keyed on every frame from a small IK rig written here (two-bone IK for arms and legs, flat
feet). A couple, 'Lead' (1.78 m) and 'Follow' (1.66 m), face each other (4 s): the lead's right hand holds the follow's
left hand, the lead's left hand rests on the follow's right shoulder, and they step sideways together and back;
'Giant' (2.05 m, A-pose rest) and 'Child' (1.30 m) receive them together (tools/demo.py).
Nothing here is a third-party asset: bodies, motions and grounds come from the project's own code.
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
from core.rig.rotations import matrix_to_quat, quat_between, quat_make_continuous, quat_to_matrix  # noqa: E402
from core.contacts.terrain.shapes import ramp, stairs  # noqa: E402
from core.rig.parts import vertex_segments  # noqa: E402
from core.types import Motion, Skeleton, SkinnedMesh  # noqa: E402

FPS = 30
LEFT = np.array([1.0, 0.0, 0.0])
FORWARD = np.array([0.0, -1.0, 0.0])
UP = np.array([0.0, 0.0, 1.0])

#: (object name, body parameters, rest pose, x offset in the scene)
CHARACTERS = (("Source", BodyParams(name="source"), "T", 0.0),
              ("TallThin", TALL_THIN, "A", 1.2),
              ("ShortHeavy", SHORT_HEAVY, "T", 2.4),
              ("StairsClimber", TALL_THIN, "A", 4.2),
              ("RampWalker", SHORT_HEAVY, "T", 6.0))
#: ground object -> (the character walking on it, core.contacts.terrain.shapes profile): each starts 0.6 m behind its
#: walker and runs along -Y, the way the 'DemoWalk' clip walks
GROUNDS = {
    "Stairs": ("StairsClimber", lambda x: stairs(start=(x, 0.6), direction=(0.0, -1.0), width=1.2, approach=1.3,
                                                 steps=8, tread=0.3, rise=0.17, landing=2.5, name="Stairs")),
    "Ramp": ("RampWalker", lambda x: ramp(start=(x, 0.6), direction=(0.0, -1.0), width=1.2, approach=1.2,
                                          length=2.0, angle_deg=15.0, landing=2.5, name="Ramp")),
}
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
        #: per hand, its fingers' direction (its vertices' mean from the wrist) and its palm's normal (the hand's
        #: thinnest axis, turned down: rest palms face down), world, at rest
        seg, names, _ = vertex_segments(skeleton, mesh, {n: n for n in skeleton.names})
        self.hand_axes = {}
        for side in ("left", "right"):
            ids = seg == names.index(f"{side}_hand")
            fingers = mesh.rest_verts[ids].mean(0) - p(f"{side}_hand")
            fingers /= np.linalg.norm(fingers)
            thin = np.linalg.svd(mesh.rest_verts[ids] - mesh.rest_verts[ids].mean(0))[2][2]   # the hand's thin axis
            palm = -thin if thin[2] > 0 else thin
            self.hand_axes[f"{side}_hand"] = (fingers, palm)
        front = mesh.rest_verts[np.abs(mesh.rest_verts[:, 2] - p("chest")[2]) < 0.05]
        self.chest_front = float(-front[:, 1].max() if len(front) else 0.15)
        self.chest_front = float(np.abs(front[:, 1]).max())

    def p(self, name):
        return self.pos[self.idx[name]].copy()

    def pose(self, hips_pos, lean, targets):
        """Local basis (J, 4) and hips location (3,) for: hips at ``hips_pos``, torso leaning forward by ``lean``
        radians, and limb ``targets`` {'left_arm': (wrist, pole), 'left_leg': (ankle, pole), ...}; a hand turned
        by {'left_hand': (finger direction, palm normal, weight)}: its world attitude blended by ``weight`` from
        following the forearm to fingers along the direction and palm facing the normal."""
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
            if n in ("left_hand", "right_hand") and n in targets:
                fingers, palm, weight = targets[n]
                desired[n] = _blend(frame, _turn(self.hand_axes[n], (fingers, palm)) @ self.rot[j], weight)
            if n in desired:
                W[j] = desired[n]
                basis[j] = frame.T @ W[j]
            else:
                basis[j] = np.eye(3)
                W[j] = frame
        hips_loc = s.rest_local[0, :3, :3].T @ (hips_pos - s.rest_local[0, :3, 3])
        return matrix_to_quat(basis), hips_loc


def _frame(direction, normal) -> np.ndarray:
    """(3, 3) orthonormal columns: ``direction``, ``normal`` made orthogonal to it, their cross product."""
    d = np.asarray(direction, float) / np.linalg.norm(direction)
    n = np.asarray(normal, float) - (np.asarray(normal, float) @ d) * d
    n /= np.linalg.norm(n)
    return np.stack([d, n, np.cross(d, n)], 1)


def _turn(rest, turned) -> np.ndarray:
    """(3, 3) the rotation taking the (direction, normal) pair ``rest`` onto ``turned``."""
    return _frame(*turned) @ _frame(*rest).T


def _blend(a: np.ndarray, b: np.ndarray, weight: float) -> np.ndarray:
    """(3, 3) rotation ``weight`` of the way from ``a`` to ``b`` (normalised quaternion blend)."""
    qa, qb = matrix_to_quat(a), matrix_to_quat(b)
    qb = qb if float(np.dot(qa, qb)) >= 0 else -qb
    q = (1.0 - weight) * qa + weight * qb
    return quat_to_matrix(q / np.linalg.norm(q))


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


def _rig_points(skeleton: Skeleton, mesh: SkinnedMesh):
    """(Rig, hips head (3,), {side: ankle}, {side: shoulder}, {side: arm length}, {side: +1 left / -1 right})."""
    rig = Rig(skeleton, mesh)
    sides = ("left", "right")
    return (rig, rig.p("hips"), {s: rig.p(f"{s}_foot") for s in sides}, {s: rig.p(f"{s}_upper_arm") for s in sides},
            {s: sum(rig.len[f"{s}_arm"]) for s in sides}, {"left": 1.0, "right": -1.0})


#: the demo's frames where a hand rests on the body or on the other hand: the three clap touches and the middle
#: of the hands on hips
HAND_REST_FRAMES = (94, 102, 110, 138)
#: the demo clip's length in frames
DEMO_FRAMES = 231
#: how deep a resting hand may press into the body (share of the height: the solver's resting press,
#: ``core.solver.surface.ALLOW``), and the steps by which the hands move out until it holds
HAND_REST_DEPTH = 0.002
HAND_REST_STEP = 0.004
#: around a hand: how far from its surface an overlap counts as the hand's (metres)
HAND_REACH = 0.03
#: how far out (metres, beside the shoulder) the hands pass in front of the thighs on their way to and from the
#: squat's arms-ahead pose: straight from beside the thighs to ahead, the forearms crossed through each other
SQUAT_HANDS_OUT = 0.1
#: in the claps, the elbows out to the side (the arms' IK pole: × the side, with 0.2 forward and 1 down): the
#: upper arms clear of the chest
CLAP_ELBOW = 0.6


def demo_motion(skeleton: Skeleton, mesh: SkinnedMesh):
    """The demo clip on the source character (``mesh`` skinned to ``skeleton``, its weights indexing that
    skeleton's bones): (Motion, events {name: (first, last) frame}). Where its hands rest
    on the hips and touch in the claps, they are moved out (``HAND_REST_STEP`` at a time, the hips and the claps
    each on its own) until they rest on the skin, pressed in no deeper than ``HAND_REST_DEPTH`` of the height
    (``HandDepths``, the metrics' mesh measure): the clip is the reference that the retargets are measured by."""
    hip_out = clap_out = 0.0
    depth_at = HAND_REST_DEPTH * float(np.ptp(mesh.rest_verts[:, 2]))
    rig = _rig_points(skeleton, mesh)
    depths = HandDepths(skeleton, mesh)
    for _ in range(25):
        rest = _demo_motion(skeleton, rig, hip_out, clap_out, HAND_REST_FRAMES)[0]
        d = depths(rest, range(len(HAND_REST_FRAMES)))
        clap_deep, hip_deep = bool(d[:-1].max() > depth_at), bool(d[-1] > depth_at)
        if not (clap_deep or hip_deep):
            break
        clap_out += HAND_REST_STEP * clap_deep
        hip_out += HAND_REST_STEP * hip_deep
    return _demo_motion(skeleton, rig, hip_out, clap_out)


class HandDepths:
    """The deepest point (metres) of a body's surface inside another part of it, within ``HAND_REACH`` of a hand (a
    hand in a hip, a hip in a hand, a hand in the other): ``core.metrics.mesh_volume``'s measure, set up once for
    ``mesh`` skinned to ``skeleton``, read per clip."""

    def __init__(self, skeleton: Skeleton, mesh: SkinnedMesh):
        from core.metrics import mesh_volume
        from core.types import Character
        bone_map = {n: n for n in skeleton.names}
        self.character = Character(skeleton, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
        self.surface = mesh_volume.setup(self.character)
        names = vertex_segments(skeleton, mesh, bone_map)[1]
        self.hand = np.isin(self.surface.part, [g for g, name in enumerate(names) if name.endswith("_hand")])

    def __call__(self, motion: Motion, frames) -> np.ndarray:
        """(len(frames),) the depth on clip ``frames`` of ``motion``."""
        import torch
        from core.metrics import mesh_volume
        from core.character.track import ClipTrack
        surf = self.surface
        x, n = ClipTrack(self.character, motion).vertices(surf.ids, normals=True, frames=list(frames))
        d = mesh_volume.depths(surf, torch.as_tensor(x), torch.as_tensor(n)).numpy()       # (F, S)
        probes = torch.as_tensor(x[:, surf.probe])
        near = torch.cdist(probes, torch.as_tensor(x[:, self.hand])).amin(-1).numpy() < HAND_REACH
        return (d * near).max(1) * surf.scale


def _demo_motion(skeleton: Skeleton, rig_points: tuple, hip_out: float, clap_out: float, frames=None):
    """``demo_motion`` with the hands on the hips ``hip_out`` metres farther out and the claps' touches
    ``clap_out`` metres farther apart; only clip ``frames`` (all when None) in the Motion. ``rig_points``:
    ``_rig_points(skeleton, mesh)``."""
    rig, H0, ankle, shoulder, la, sign = rig_points
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
        clap_touch = np.array([sign[s] * (0.02 + 0.5 * clap_out), front, chest_z])
        on_hip = np.array([sign[s] * (rig.hip_half_width + 0.045 + hip_out), 0.0, H0[2] + 0.06])
        off_hip = on_hip + [sign[s] * 0.08, 0.0, 0.0]           # away from the hip first, then down beside the thigh
        ahead = shoulder[s] + [sign[s] * -0.05, -0.85 * la[s], -0.05]
        # on the way to and from "ahead", the hands pass in front of the thighs, each on its own side
        aside = shoulder[s] + [sign[s] * SQUAT_HANDS_OUT, -0.5 * la[s], -0.7 * la[s]]
        hands[s] = {0: down, 20: down, 35: swing(-0.12 * sign[s]), 50: swing(0.12 * sign[s]), 65: swing(-0.1 * sign[s]),
                    80: down, 88: clap_far, 94: clap_touch, 98: clap_far, 102: clap_touch, 106: clap_far,
                    110: clap_touch, 116: clap_far, 126: on_hip, 150: on_hip, 155: off_hip, 162: down, 171: aside,
                    180: ahead, 197: ahead, 206: aside, 215: down, 230: down}
    #: in the claps the hands turn, fingers forward and up, palms facing each other
    clap_turn = {82: 0.0, 88: 1.0, 116: 1.0, 124: 0.0}
    events = {"steps": (20, 80), "clap": (88, 116), "hands_on_hips": (126, 150), "squat": (160, 215)}
    frames = range(DEMO_FRAMES) if frames is None else frames
    rots = np.empty((len(frames), skeleton.num_bones, 4))
    locs = np.zeros((len(frames), skeleton.num_bones, 3))
    for k, t in enumerate(frames):
        hp = _smooth(hips, t)
        hip_offset = hp - H0
        targets = {}
        for s in ("left", "right"):
            hand = _smooth(hands[s], t)
            if t <= 80 or t >= 215:                     # arms hang/swing relative to the moving body
                hand = hand + [0, hip_offset[1], 0]
            else:
                hand = hand + [0, hip_offset[1], 0] if not (160 <= t <= 215) else hand + [0, hip_offset[1], 0]
            pole_arm = (np.array([sign[s] * CLAP_ELBOW, 0.2, -1.0]) if 84 <= t <= 118 else
                        np.array([sign[s] * 1.0, 0.6, 0.0]) if 118 < t < 158 else np.array([0.0, 1.0, -0.3]))
            targets[f"{s}_arm"] = (hand, pole_arm)
            if 82 < t < 124:
                targets[f"{s}_hand"] = (np.array([0.0, -0.85, 0.5]), np.array([-sign[s], 0.0, 0.0]),
                                        float(_smooth(clap_turn, t)))
            a = _smooth(foot[s], t)
            for f0, f1 in lift[s]:
                if f0 < t < f1:
                    a = a + [0, 0, 0.07 * np.sin(np.pi * (t - f0) / (f1 - f0))]
            targets[f"{s}_leg"] = (a, np.array([sign[s] * 0.15, -1.0, 0.0]))
        q, loc = rig.pose(hp, float(_smooth(lean, t)), targets)
        rots[k] = q
        locs[k, 0] = loc
    return Motion(quat_make_continuous(rots), locs, float(FPS), 1), events


def walk_motion(skeleton: Skeleton, mesh: SkinnedMesh, steps: int = 10, step: float = 0.34,
                step_frames: int = 16, rest_frames: int = 15):
    """A straight walk on flat ground along -Y: ``steps`` steps of ``step`` metres, ``step_frames`` frames each,
    standing still for ``rest_frames`` frames before and after. Feet stay flat and planted while they carry the
    body (the swing foot lifts 8 cm on an arc), the hips move with the feet and bob 1.5 cm, the arms swing.
    Returns (Motion, events {name: (first, last) frame})."""
    rig, H0, ankle, shoulder, la, sign = _rig_points(skeleton, mesh)
    t0 = rest_frames
    foot_y = {"left": {0: 0.0}, "right": {0: 0.0}}
    swings = {"left": [], "right": []}
    hips_y = {0: 0.0, t0: 0.0}
    for i in range(steps):
        side = "left" if i % 2 == 0 else "right"
        other = "right" if side == "left" else "left"
        a, b = t0 + i * step_frames, t0 + (i + 1) * step_frames
        land = -(i + 1) * step if i < steps - 1 else -(steps - 1) * step   # the last step closes the feet
        foot_y[side][a], foot_y[side][b] = max(foot_y[side].items())[1], land
        foot_y[other][b] = max(foot_y[other].items())[1]
        swings[side].append((a, b))
        hips_y[b] = 0.5 * (land + foot_y[other][b])
    T = t0 + steps * step_frames + rest_frames
    for s in ("left", "right"):
        foot_y[s][T - 1] = max(foot_y[s].items())[1]
    hips_y[T - 1] = hips_y[max(hips_y)]
    walk = (t0, t0 + steps * step_frames)
    rots = np.empty((T, skeleton.num_bones, 4))
    locs = np.zeros((T, skeleton.num_bones, 3))
    for t in range(T):
        moving = walk[0] < t < walk[1]
        phase = (t - walk[0]) / step_frames
        y = float(np.interp(t, sorted(hips_y), [hips_y[k] for k in sorted(hips_y)]))
        hp = H0 + [0.0, y, -0.02 + (0.008 * np.cos(2 * np.pi * phase) if moving else 0.0)]
        targets = {}
        for s in ("left", "right"):
            a = ankle[s] + [0.0, float(_smooth(foot_y[s], t)), 0.0]
            for f0, f1 in swings[s]:
                if f0 < t < f1:
                    a = a + [0, 0, 0.08 * np.sin(np.pi * (t - f0) / (f1 - f0))]
            targets[f"{s}_leg"] = (a, np.array([sign[s] * 0.15, -1.0, 0.0]))
            arm = 0.12 * np.sin(np.pi * phase) * (1.0 if s == "left" else -1.0) if moving else 0.0
            hand = shoulder[s] + [sign[s] * 0.06, y + arm, -0.97 * la[s] + 0.02]
            targets[f"{s}_arm"] = (hand, np.array([0.0, 1.0, -0.3]))
        q, loc = rig.pose(hp, 0.04 if moving else 0.0, targets)
        rots[t] = q
        locs[t, 0] = loc
    return Motion(quat_make_continuous(rots), locs, float(FPS), 1), {"walk": walk}


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

def build_armature(name, skeleton: Skeleton, x_offset: float = 0.0, lengths: dict = None):
    """An armature object with ``skeleton``'s bones (rest matrices, parents; each bone's tail towards its nearest
    child, or ``lengths[bone name]`` metres along its Y axis) in the current scene, moved ``x_offset`` metres
    along X; returns it."""
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
        length = (lengths or {}).get(n) or min((np.linalg.norm(G[c, :3, 3] - G[j, :3, 3]) for c in kids), default=0.06)
        eb.head = (0, 0, 0)
        eb.tail = (0, max(length, 0.02), 0)
        eb.matrix = Matrix(G[j].tolist())
        if skeleton.parents[j] >= 0:
            eb.parent = ebs[skeleton.parents[j]]
        ebs.append(eb)
    bpy.ops.object.mode_set(mode='OBJECT')
    return arm


def mesh_object(name, verts, faces, parent=None):
    """A smooth-shaded mesh object from (V, 3) vertices and a list of polygons, linked to the scene, optionally
    parented (object parenting, no offset) to ``parent``; returns it."""
    import bpy

    me = bpy.data.meshes.new(name)
    me.from_pydata(np.asarray(verts, float).tolist(), [], [list(map(int, f)) for f in faces])
    me.update()
    for p in me.polygons:
        p.use_smooth = True
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    ob.parent = parent
    return ob


def skin(ob, arm, bone_names, weight_bones, weight_values):
    """Vertex groups named after ``bone_names`` from (V, K) weights, and an Armature modifier on ``arm``."""
    groups = {}
    for v in range(len(weight_bones)):
        for b, w in zip(weight_bones[v], weight_values[v]):
            if w > 0:
                n = bone_names[int(b)]
                if n not in groups:
                    groups[n] = ob.vertex_groups.get(n) or ob.vertex_groups.new(name=n)
                groups[n].add([v], float(w), 'ADD')
    mod = ob.modifiers.new("Armature", 'ARMATURE')
    mod.object = arm
    return ob


def polygons(mesh: SkinnedMesh) -> list:
    """The polygons of a core SkinnedMesh as lists of vertex indices."""
    sizes = mesh.face_sizes
    if len(set(sizes.tolist())) == 1:
        return mesh.face_indices.reshape(-1, int(sizes[0])).tolist()
    return [f.tolist() for f in np.split(mesh.face_indices, mesh.face_offsets[1:-1])]


def build_character(name, skeleton: Skeleton, mesh: SkinnedMesh, x_offset: float):
    """Armature + skinned mesh objects in the current scene; returns the armature object."""
    arm = build_armature(name, skeleton, x_offset)
    ob = mesh_object(f"{name}_body", mesh.rest_verts, polygons(mesh), parent=arm)
    for n in skeleton.names:      # every bone gets its group, weighted or not (as exporters write them)
        ob.vertex_groups.new(name=n)
    skin(ob, arm, skeleton.names, mesh.weight_bones, mesh.weight_values)
    return arm


def build_ground(name: str, surface):
    """A mesh object from a core.contacts.terrain GroundSurface (world space), made solid by a Solidify modifier
    (30 cm downwards): the retarget reads its evaluated mesh, whose top is the surface."""
    import bpy

    me = bpy.data.meshes.new(name)
    me.from_pydata(surface.vertices.tolist(), [], surface.triangles.tolist())
    me.update()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    solid = ob.modifiers.new("Solidify", 'SOLIDIFY')
    solid.thickness, solid.offset = 0.3, -1.0
    ob.color = (0.62, 0.64, 0.68, 1.0)
    return ob


def build_scene(out_path, report=print):
    """Generate the bodies, the source motion, and save the .blend. Returns {'events':..., 'characters':...}."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = FPS
    info = {"characters": {}}
    bodies = {}
    made = {}       # (params, pose) -> (skeleton, mesh): a walker on a ground has the body of another character

    def body(params, pose):
        if (params, pose) not in made:
            made[params, pose] = make_body(params, pose=pose)[:2]
        return made[params, pose]
    for name, params, pose, x in CHARACTERS:
        skel, mesh = body(params, pose)
        bodies[name] = (skel, mesh)
        build_character(name, skel, mesh, x)
        height = float(np.ptp(mesh.rest_verts[:, 2]))
        info["characters"][name] = {"height_m": round(height, 3), "rest_pose": pose, "verts": mesh.num_verts,
                                    "bones": skel.num_bones, "params": params.name}
        report(f"character '{name}': {params.name}, {height:.2f} m, {mesh.num_verts} vertices, {pose}-pose rest")
    for name, params, pose, xy, turn in COUPLE + PARTNERS:
        skel, mesh = body(params, pose)
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
    mesh = bridge.read_skinned_mesh(src, blender_skel)       # its weights index the armature's bones, in its order
    walk, walk_events = walk_motion(blender_skel, mesh)
    bridge.write_motion(src, blender_skel, walk, "DemoWalk").use_fake_user = True
    motion, events = demo_motion(blender_skel, mesh)
    bridge.write_motion(src, blender_skel, motion, "DemoMotion")
    scene.frame_start, scene.frame_end = 1, motion.num_frames
    info["events"] = events
    info["frames"] = motion.num_frames
    info["walk"] = {"action": "DemoWalk", "frames": walk.num_frames, "events": walk_events}
    info["grounds"] = {}
    offsets = {name: x for name, _, _, x in CHARACTERS}
    for name, (walker, shape) in GROUNDS.items():
        surface = shape(offsets[walker]).surface
        build_ground(name, surface)
        x0, x1, y0, y1, z0, z1 = surface.bounds
        info["grounds"][name] = {"walker": walker, "height_m": round(z1 - z0, 3),
                                 "triangles": len(surface.triangles)}
        report(f"ground '{name}' under '{walker}': {y1 - y0:.1f} m long, {z1 - z0:.2f} m high")
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
        self.retarget.extension.disable_addon(self.retarget.REPO_NAME, self.repo)   # its folder removed too
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
    from tools.extension import exit_after
    exit_after(main)
