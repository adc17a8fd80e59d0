"""Morphology of the generated body: ``BodyParams`` (with the demo presets ``TALL_THIN`` and ``SHORT_HEAVY``),
the canonical joint layout (``_joint_layout``) and the implicit primitives placed on it (``_primitives``).
Part of the body generator (``core.body``) behind the key-vertex template (ReConForM §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CoreError
from .shapes import _frame, _Prim


@dataclass(frozen=True)
class BodyParams:
    """Morphology of a generated body. Ratios are multipliers of the neutral proportions (1.0 = neutral).

    Attributes:
        height: total height in metres (soles to top of the head); the whole body is scaled to it.
        leg_length, arm_length, torso_length, neck_length: segment-length ratios.
        shoulder_width, hip_width: joint-spacing ratios.
        torso_width, torso_depth: girth ratios of the torso (side to side, front to back).
        belly: 0 = flat, 1 = large round belly (adds a front ellipsoid; 2 is extreme).
        buttocks, chest: prominence ratios.
        limb_thickness: radius ratio of arms and legs.
        head_size, hand_size, foot_size: size ratios.
        a_pose_angle: degrees below horizontal of the upper arms for ``pose='A'``.
        resolution: grid spacing of the mesher as a fraction of the height (smaller = more vertices).
        name: armature/mesh name.
    """

    height: float = 1.75
    leg_length: float = 1.0
    arm_length: float = 1.0
    torso_length: float = 1.0
    neck_length: float = 1.0
    shoulder_width: float = 1.0
    hip_width: float = 1.0
    torso_width: float = 1.0
    torso_depth: float = 1.0
    belly: float = 0.0
    buttocks: float = 1.0
    chest: float = 1.0
    limb_thickness: float = 1.0
    head_size: float = 1.0
    hand_size: float = 1.0
    foot_size: float = 1.0
    a_pose_angle: float = 45.0
    resolution: float = 0.0105
    name: str = "body"

    def __post_init__(self):
        for f in ("height", "leg_length", "arm_length", "torso_length", "neck_length", "shoulder_width",
                  "hip_width", "torso_width", "torso_depth", "buttocks", "chest", "limb_thickness", "head_size",
                  "hand_size", "foot_size", "resolution"):
            v = getattr(self, f)
            if not (np.isfinite(v) and v > 0):
                raise CoreError(f"BodyParams '{self.name}': {f} must be a positive number, got {v}.")
        if not (0.0 <= self.belly <= 3.0):
            raise CoreError(f"BodyParams '{self.name}': belly must be in [0, 3], got {self.belly}.")
        if not (0.0 <= self.a_pose_angle <= 80.0):
            raise CoreError(f"BodyParams '{self.name}': a_pose_angle must be in [0, 80] degrees.")
        if self.resolution > 0.03:
            raise CoreError(f"BodyParams '{self.name}': resolution {self.resolution} is too coarse (max 0.03).")


#: Two ready-made demo morphologies (the demo pairs them with the neutral body).
TALL_THIN = BodyParams(height=1.95, leg_length=1.12, arm_length=1.08, torso_width=0.82, torso_depth=0.82,
                       limb_thickness=0.78, buttocks=0.8, chest=0.85, shoulder_width=0.95, hip_width=0.9,
                       head_size=0.95, name="tall_thin")
SHORT_HEAVY = BodyParams(height=1.55, leg_length=0.86, arm_length=0.93, torso_width=1.3, torso_depth=1.3,
                         belly=1.6, limb_thickness=1.35, buttocks=1.3, chest=1.15, shoulder_width=1.1,
                         hip_width=1.25, head_size=1.08, neck_length=0.8, name="short_heavy")

def _joint_layout(p: BodyParams):
    """Canonical bone (head, tail) in units of the neutral height, left side at +X, facing -Y."""
    J = {}
    ls, as_, ts, hs, fs = p.leg_length, p.arm_length, p.torso_length, p.hand_size, p.foot_size
    ankle_z = 0.045 * fs
    knee_z = ankle_z + 0.245 * ls
    hipj_z = knee_z + 0.245 * ls
    hip_x = 0.052 * p.hip_width
    pel = hipj_z + 0.02
    z_spine, z_chest, z_uchest = pel + 0.065 * ts, pel + 0.135 * ts, pel + 0.205 * ts
    z_neck = pel + 0.30 * ts
    z_shoulder = pel + 0.268 * ts
    z_head = z_neck + 0.045 * p.neck_length
    J["hips"] = (np.array([0, 0.0, pel]), np.array([0, 0.0, z_spine]))
    J["spine"] = (J["hips"][1], np.array([0, 0.0, z_chest]))
    J["chest"] = (J["spine"][1], np.array([0, 0.0, z_uchest]))
    J["upper_chest"] = (J["chest"][1], np.array([0, 0.0, z_neck]))
    J["neck"] = (J["upper_chest"][1], np.array([0, -0.004, z_head]))
    J["head"] = (J["neck"][1], np.array([0, -0.004, z_head + 0.11 * p.head_size]))
    sh_x = 0.105 * p.shoulder_width
    L = {}
    L["shoulder"] = (np.array([0.018, -0.006, z_neck - 0.025 * ts]), np.array([sh_x, 0.0, z_shoulder]))
    elbow = np.array([sh_x + 0.172 * as_, 0.0, z_shoulder])
    wrist = elbow + np.array([0.150 * as_, 0.0, 0.0])
    L["upper_arm"] = (L["shoulder"][1], elbow)
    L["lower_arm"] = (elbow, wrist)
    knuckle = wrist + np.array([0.055 * hs, 0.0, 0.0])
    L["hand"] = (wrist, knuckle)
    finger_seg = {"index": (0.020, 0.014, 0.012), "middle": (0.022, 0.016, 0.013),
                  "ring": (0.021, 0.015, 0.012), "little": (0.016, 0.011, 0.010)}
    finger_off = {"index": (-0.003, -0.016), "middle": (0.0, -0.005), "ring": (-0.002, 0.006),
                  "little": (-0.008, 0.016)}
    for f in ("index", "middle", "ring", "little"):
        h = wrist + np.array([0.055 * hs + finger_off[f][0] * hs, finger_off[f][1] * hs, 0.0])
        for k, seg in enumerate(finger_seg[f], 1):
            t = h + np.array([seg * hs, 0.0, 0.0])
            L[f"{f}_{k}"] = (h, t)
            h = t
    tdir = np.array([1.0, -0.85, -0.35])
    tdir /= np.linalg.norm(tdir)
    h = wrist + np.array([0.012, -0.013, -0.005]) * hs
    for k, seg in enumerate((0.022, 0.017, 0.015), 1):
        t = h + tdir * seg * hs
        L[f"thumb_{k}"] = (h, t)
        h = t
    L["upper_leg"] = (np.array([hip_x, 0.0, hipj_z]), np.array([hip_x, 0.0, knee_z]))
    L["lower_leg"] = (L["upper_leg"][1], np.array([hip_x, 0.0, ankle_z]))
    ball = np.array([hip_x + 0.006 * fs, -0.088 * fs, 0.014 * fs])
    L["foot"] = (L["lower_leg"][1], ball)
    L["toes"] = (ball, np.array([hip_x + 0.01 * fs, -0.127 * fs, 0.012 * fs]))
    for k, (h, t) in L.items():
        J[f"left_{k}"] = (h, t)
        m = np.array([-1.0, 1.0, 1.0])
        J[f"right_{k}"] = (h * m, t * m)
    return J



def _primitives(p: BodyParams, J):
    """Implicit primitives in units of the neutral height."""
    P = []
    lt = p.limb_thickness
    tw, td = p.torso_width, p.torso_depth
    hs, fs, hd = p.hand_size, p.foot_size, p.head_size

    def ell(center, radii, bone, blend, geom=True):
        M = np.eye(4)
        M[:3, 3] = -np.asarray(center, float)
        P.append(_Prim("ellipsoid", M, (np.asarray(radii, float),), bone, blend, geom,
                       radius_bound=float(max(radii)) + blend + 0.01, anchor=(np.asarray(center, float),)))

    def cone(a, b, r1, r2, bone, blend, geom=True, squash=None, x_hint=(0.0, 0.0, 1.0), ground=None):
        a, b = np.asarray(a, float), np.asarray(b, float)
        M = _frame(a, b - a, np.asarray(x_hint, float))
        s = np.ones(3) if squash is None else np.array([squash, 1.0, 1.0])
        pr = _Prim("cone", M, (float(np.linalg.norm(b - a)), r1, r2), bone, blend, geom, scale=s,
                   radius_bound=max(r1, r2) + blend + 0.01, anchor=(a, b))
        if ground is not None:
            pr.ground, pr.ground_z = True, ground
        P.append(pr)

    def box(center, axis, x_hint, half, r, bone, blend):
        M = _frame(center, axis, np.asarray(x_hint, float))
        P.append(_Prim("box", M, (np.asarray(half, float), r), bone, blend,
                       radius_bound=float(np.linalg.norm(half)) + r + blend + 0.01,
                       anchor=(np.asarray(center, float),)))

    pel = J["hips"][0]
    z_sp, z_ch, z_uc = J["spine"][0][2], J["chest"][0][2], J["upper_chest"][0][2]
    hipw = p.hip_width
    # --- torso (blend radius large: one smooth trunk)
    ell(pel + [0, 0.004, -0.005], [0.088 * hipw * tw ** 0.5, 0.060 * td, 0.062], "hips", 0.0)
    bt = p.buttocks
    for sx in (1, -1):
        ell(pel + [sx * 0.040 * hipw, 0.030 + 0.010 * (bt - 1), -0.030], [0.050 * bt ** 0.5, 0.042 * bt, 0.055],
            "hips", 0.03)
    ell([0, -0.004, (z_sp + z_ch) / 2], [0.078 * tw, 0.055 * td, 0.070], "spine", 0.035)
    if p.belly > 0:
        b = p.belly
        ell([0, -0.022 - 0.020 * b * td, z_sp + 0.005], [0.070 * tw * (1 + 0.15 * b), 0.040 * (0.6 + 0.5 * b) * td,
                                                        0.060 * (1 + 0.15 * b)], "spine", 0.04)
    ell([0, -0.004, z_ch + 0.035], [0.090 * tw, 0.058 * td, 0.070], "chest", 0.035)
    ell([0, 0.002, z_uc + 0.040], [0.100 * tw * p.shoulder_width ** 0.5, 0.056 * td, 0.060], "upper_chest", 0.035)
    for sx in (1, -1):  # pectorals / breasts
        ell([sx * 0.040 * tw, -0.040 * td - 0.006 * (p.chest - 1), z_uc + 0.012],
            [0.038 * tw, 0.022 * p.chest * td, 0.030], "upper_chest", 0.03)
        ell([sx * 0.045 * tw, 0.040 * td, z_uc + 0.030], [0.042, 0.020 * td, 0.05], "upper_chest", 0.03)  # blades
    # --- neck and head
    cone(J["neck"][0] + [0, 0.004, -0.02], J["neck"][1], 0.036 * tw ** 0.3, 0.031, "neck", 0.03)
    hc = J["head"][0] + np.array([0, -0.008, 0.048 * hd])
    ell(hc, [0.050 * hd, 0.058 * hd, 0.064 * hd], "head", 0.015)
    ell(J["head"][0] + np.array([0, -0.026, 0.012]) * hd, [0.034 * hd, 0.034 * hd, 0.036 * hd], "head", 0.02)
    cone(hc + np.array([0, -0.050, 0.004]) * hd, hc + np.array([0, -0.060, -0.014]) * hd,
         0.006 * hd, 0.008 * hd, "head", 0.006)  # nose
    # --- arms
    for side, sx in (("left", 1), ("right", -1)):
        s = f"{side}_"
        sh, el, wr = J[s + "upper_arm"][0], J[s + "lower_arm"][0], J[s + "hand"][0]
        cone(J[s + "shoulder"][0] + [0, 0.006, 0.0], sh, 0.034 * tw ** 0.5, 0.030 * lt, s + "shoulder", 0.03)
        ell(sh + [sx * 0.006, 0.0, 0.004], [0.034 * lt, 0.034 * lt, 0.034 * lt], s + "upper_arm", 0.02)
        cone(sh, el, 0.031 * lt, 0.023 * lt, s + "upper_arm", 0.015)
        cone(el, wr, 0.024 * lt, 0.017 * lt, s + "lower_arm", 0.012, squash=0.78)
        # hand: palm box (flat palm -Z, back +Z), finger mitten, thumb
        kn = J[s + "hand"][1]
        pc = (wr + kn) / 2 + np.array([sx * 0.002, 0.0, 0.0]) * hs
        box(pc, [0.0, 0.0, 1.0], [sx, 0.0, 0.0], [0.024 * hs, 0.0185 * hs, 0.0028 * hs], 0.0058 * hs, s + "hand",
            0.010)
        fa = np.mean([J[f"{s}{f}_1"][0] for f in ("index", "middle", "ring", "little")], 0)
        ft = fa + np.array([sx * 0.050 * hs, 0.0, -0.002 * hs])
        cone(fa - np.array([sx * 0.004 * hs, 0, 0]), ft, 0.0215 * hs, 0.018 * hs, None, 0.006, squash=0.30,
             x_hint=(0.0, 0.0, 1.0))
        for f in ("index", "middle", "ring", "little"):
            for k in (1, 2, 3):
                a, b = J[f"{s}{f}_{k}"]
                cone(a, b, 0.0055 * hs, 0.0055 * hs, f"{s}{f}_{k}", 0.0, geom=False)
        for k in (1, 2, 3):
            a, b = J[f"{s}thumb_{k}"]
            cone(a, b, 0.0095 * hs if k == 1 else 0.0085 * hs, 0.0085 * hs if k < 3 else 0.0075 * hs,
                 f"{s}thumb_{k}", 0.008 if k == 1 else 0.003)
        # --- legs
        hj, kn_, an = J[s + "upper_leg"][0], J[s + "lower_leg"][0], J[s + "foot"][0]
        cone(hj + [sx * 0.004, 0.0, 0.012], kn_, 0.049 * lt * hipw ** 0.3, 0.034 * lt, s + "upper_leg", 0.015)
        cone(kn_, an, 0.034 * lt, 0.021 * lt, s + "lower_leg", 0.015)
        ell(kn_ + np.array([0.0, 0.010, -0.075]), np.array([0.028, 0.030, 0.065]) * lt, s + "lower_leg", 0.02)
        # foot: heel-to-ball flattened cone with a flat sole at z = 0, then toes
        ball, tip = J[s + "foot"][1], J[s + "toes"][1]
        heel = an + np.array([0.0, 0.030, -0.020]) * fs
        cone(heel, ball, 0.025 * fs, 0.026 * fs, s + "foot", 0.012, squash=0.62, x_hint=(0.0, 0.0, 1.0),
             ground=0.0)
        cone(ball, tip, 0.027 * fs, 0.016 * fs, s + "toes", 0.008, squash=0.50, x_hint=(0.0, 0.0, 1.0), ground=0.0)
    for pr in P:
        pr.params_scale = 1.0
    return P


__all__ = ["SHORT_HEAVY", "TALL_THIN", "BodyParams"]
