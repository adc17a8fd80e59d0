"""Parametric skinned humanoid on the canonical skeleton (pure numpy).

The body is an implicit surface: a smooth union of ellipsoids (torso, head), tapered capsules (limbs), rounded
boxes (palms) and flattened capsules (finger mittens, feet) placed on the canonical bones, meshed with surface
nets (one quad per sign-changing grid edge) and projected onto the exact implicit surface. The result is one
closed, smooth, watertight quad mesh (~6-9k vertices at the default resolution) with smooth skin weights
(exponential falloff of the distance to each bone's primitives, restricted to skeletal neighbours so that the
left thigh never follows the right one).

Frame of the generated character: armature space = world space (``object_matrix`` is the identity), metres,
Z up, the character faces -Y (Blender's front view), its left is +X, the soles rest on z = 0.

Used for the key-vertex template (neutral parameters, T-pose), for demo characters (``BodyParams``), and to
give skeleton-only motion sources a body (``fit_body_to_skeleton``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .errors import CoreError
from .humanoid import CANONICAL_PARENT, FINGERS
from .types import Character, Skeleton, SkinnedMesh

# ----------------------------------------------------------------------------------------------- parameters


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

# ----------------------------------------------------------------------------------------------- SDF pieces


def _sd_ellipsoid(q, r):
    """Approximate signed distance of local points q (n,3) to an ellipsoid with radii r (3,)."""
    k0 = np.linalg.norm(q / r, axis=1)
    k1 = np.linalg.norm(q / (r * r), axis=1)
    return k0 * (k0 - 1.0) / np.maximum(k1, 1e-12)


def _sd_round_cone(q, length, r1, r2):
    """Exact signed distance to a round cone along local +Z from 0 (radius r1) to ``length`` (radius r2)."""
    b = np.array([0.0, 0.0, length])
    l2 = length * length
    rr = r1 - r2
    a2 = l2 - rr * rr
    il2 = 1.0 / l2
    y = q[:, 2] * length
    z = y - l2
    x2 = ((q * l2 - b[None] * y[:, None]) ** 2).sum(1)
    y2 = y * y * l2
    z2 = z * z * l2
    k = np.sign(rr) * rr * rr * x2
    out = (np.sqrt(np.maximum(x2 * a2 * il2, 0.0)) + y * rr) * il2 - r1
    c2 = np.sign(y) * a2 * y2 < k
    out = np.where(c2, np.sqrt(x2 + y2) * il2 - r1, out)
    c1 = np.sign(z) * a2 * z2 > k
    out = np.where(c1, np.sqrt(x2 + z2) * il2 - r2, out)
    return out


def _sd_round_box(q, half, r):
    d = np.abs(q) - half
    return np.linalg.norm(np.maximum(d, 0.0), axis=1) + np.minimum(d.max(1), 0.0) - r


def _smin(a, b, k):
    if k <= 0:
        return np.minimum(a, b)
    h = np.maximum(k - np.abs(a - b), 0.0) / k
    return np.minimum(a, b) - h * h * k * 0.25


def _smax(a, b, k):
    return -_smin(-a, -b, k)


def _frame(origin, z_axis, x_hint):
    """(4,4) world->local transform of a frame at ``origin`` with local Z along ``z_axis``."""
    z = np.asarray(z_axis, float)
    z = z / np.linalg.norm(z)
    x = np.asarray(x_hint, float) - z * (np.dot(x_hint, z))
    if np.linalg.norm(x) < 1e-8:
        x = np.cross(z, [0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.cross(z, [1.0, 0.0, 0.0])
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])  # rows: local axes
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = -R @ np.asarray(origin, float)
    return M


@dataclass
class _Prim:
    """One implicit primitive: a shape in a local frame, the bone it skins to, how it blends."""

    kind: str                   # 'ellipsoid' | 'cone' | 'box'
    to_local: np.ndarray        # (4,4) world -> local
    params: tuple
    bone: str | None            # bone for skin weights (None: geometry only)
    blend: float = 0.0          # smooth-union radius with what came before
    geom: bool = True           # contributes to the surface
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))  # local axis squash (x, y, z)
    ground: bool = False        # clipped by the plane z = ground_z (soles)
    ground_z: float = 0.0
    radius_bound: float = 0.0   # bounding radius around the local origin..end (for the grid bbox)
    anchor: tuple = ()          # world points covered by the bound

    def sdf(self, p):
        q = p @ self.to_local[:3, :3].T + self.to_local[:3, 3]
        s = self.scale
        if self.kind == "ellipsoid":
            d = _sd_ellipsoid(q, np.asarray(self.params[0]))
        elif self.kind == "cone":
            length, r1, r2 = self.params
            d = _sd_round_cone(q / s, length / s[2], r1, r2) * s.min()
        elif self.kind == "box":
            half, r = self.params
            d = _sd_round_box(q, np.asarray(half), r)
        else:  # pragma: no cover
            raise ValueError(self.kind)
        if self.ground:
            d = _smax(d, self.ground_z - p[:, 2], 0.004 * self.params_scale)
        return d

    params_scale: float = 1.0

    def bbox(self):
        pts = np.asarray(self.anchor)
        return pts.min(0) - self.radius_bound, pts.max(0) + self.radius_bound


# ----------------------------------------------------------------------------------------------- layout


def _bone_frames(joints):
    """Rest matrices (armature = world) from canonical (head, tail) pairs; Blender-like roll."""
    out = {}
    for name, (h, t) in joints.items():
        y = t - h
        y = y / np.linalg.norm(y)
        ref = np.array([0.0, 0.0, 1.0]) if abs(y[1]) > 0.7 else np.array([0.0, -1.0, 0.0])
        x = np.cross(y, ref)
        x /= np.linalg.norm(x)
        z = np.cross(x, y)
        M = np.eye(4)
        M[:3, 0], M[:3, 1], M[:3, 2], M[:3, 3] = x, y, z, h
        out[name] = M
    return out


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


def _canonical_order():
    """Canonical bones, parents before children (core bones then fingers)."""
    from .humanoid import CANONICAL_BONES
    order = []
    for b in CANONICAL_BONES:
        order.append(b)
    return order


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


# ----------------------------------------------------------------------------------------------- meshing


class _Body:
    """Implicit body in world metres: primitives, field, mesher, skinning."""

    def __init__(self, params: BodyParams):
        self.params = params
        J = _joint_layout(params)
        prims = _primitives(params, J)
        # exact height: scale so that the highest surface point is at params.height
        self._prims = prims
        self._scale = 1.0
        top = self._top_z()
        self._scale = params.height / top
        s = self._scale
        for pr in prims:
            pr.to_local = pr.to_local.copy()
            pr.to_local[:3, 3] *= s
            if pr.kind == "ellipsoid":
                pr.params = (pr.params[0] * s,)
            elif pr.kind == "cone":
                pr.params = (pr.params[0] * s, pr.params[1] * s, pr.params[2] * s)
            else:
                pr.params = (pr.params[0] * s, pr.params[1] * s)
            pr.blend *= s
            pr.radius_bound *= s
            pr.anchor = tuple(np.asarray(a) * s for a in pr.anchor)
            pr.ground_z *= s
            pr.params_scale = s
        self._scale = 1.0
        self.joints = {k: (h * s, t * s) for k, (h, t) in J.items()}

    def _top_z(self):
        zs = np.linspace(0.9, 1.2, 3001)
        pts = np.stack([np.zeros_like(zs), np.full_like(zs, -0.008), zs], 1)
        inside = self._sdf_raw(pts) < 0
        return float(zs[np.nonzero(inside)[0].max()])

    # -- field
    def _sdf_raw(self, pts):
        d = np.full(len(pts), 1e3)
        for pr in self._prims:
            if pr.geom:
                d = _smin(d, pr.sdf(pts), pr.blend)
        return d

    def sdf(self, pts):
        """(n,3) -> (n,) signed distance (approximate away from the surface), exactly mirror-symmetric
        (the smooth union depends on the order of left and right pieces; both orders are averaged)."""
        return 0.5 * (self._sdf_raw(pts) + self._sdf_raw(pts * np.array([-1.0, 1.0, 1.0])))

    def grad(self, pts, eps=1e-4):
        g = np.empty_like(pts)
        for a in range(3):
            e = np.zeros(3)
            e[a] = eps
            g[:, a] = (self.sdf(pts + e) - self.sdf(pts - e)) / (2 * eps)
        return g

    def _grid_field(self, xs, ys, zs):
        X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
        F = np.full(X.shape, 1e3)
        for pr in self._prims:
            if not pr.geom:
                continue
            lo, hi = pr.bbox()
            i0, i1 = np.searchsorted(xs, lo[0]), np.searchsorted(xs, hi[0], side="right")
            j0, j1 = np.searchsorted(ys, lo[1]), np.searchsorted(ys, hi[1], side="right")
            k0, k1 = np.searchsorted(zs, lo[2]), np.searchsorted(zs, hi[2], side="right")
            if i1 <= i0 or j1 <= j0 or k1 <= k0:
                continue
            sub = (slice(i0, i1), slice(j0, j1), slice(k0, k1))
            pts = np.stack([X[sub].ravel(), Y[sub].ravel(), Z[sub].ravel()], 1)
            F[sub] = _smin(F[sub], pr.sdf(pts).reshape(X[sub].shape), pr.blend)
        return F

    def mesh(self):
        """Surface nets on a grid (finer in Z around the hands), projected on the implicit surface.

        Returns verts (V,3), quads (F,4) int64 with outward (counter-clockwise) winding.
        """
        H = self.params.height
        h = self.params.resolution * H
        lo = np.min([pr.bbox()[0] for pr in self._prims if pr.geom], 0) - 2 * h
        hi = np.max([pr.bbox()[1] for pr in self._prims if pr.geom], 0) + 2 * h
        lo[2] = -2 * h
        nxh = int(np.ceil(max(-lo[0], hi[0]) / h))
        # symmetric about x = 0 with a cell centred on it: a mirror-symmetric mesh with a vertex column on the
        # midline (face centre, navel, spine)
        xs = h * (np.arange(2 * nxh + 2, dtype=float) - nxh - 0.5)
        ys = np.arange(lo[1], hi[1] + h, h)
        hz = self.joints["left_hand"][0][2]
        band = 0.03 * H
        zs = np.unique(np.round(np.concatenate([
            np.arange(lo[2], hz - band, h), np.arange(hz - band, hz + band, h / 2.5),
            np.arange(hz + band, hi[2] + h, h)]), 9))
        F = self._grid_field(xs, ys, zs)
        F = 0.5 * (F + F[::-1])  # xs is symmetric: exact mirror symmetry (see sdf)
        verts, quads = _surface_nets(F, xs, ys, zs)
        verts = self._project(verts, h)
        return verts, quads

    def _project(self, v, h):
        for _ in range(4):
            d = self.sdf(v)
            g = self.grad(v)
            step = d[:, None] * g / np.maximum((g * g).sum(1, keepdims=True), 1e-12)
            n = np.linalg.norm(step, axis=1, keepdims=True)
            v = v - step * np.minimum(1.0, 0.75 * h / np.maximum(n, 1e-12))
        return v

    # -- skin weights
    def weights(self, verts, bone_names, parents, k=4):
        """Smooth skin weights: w_b ∝ exp(-(d_b - d_min) / tau), d_b = distance to bone b's primitives,
        over the owner bone and its skeletal neighbours (parent, children; sibling fingers).

        Returns (V, k) bone indices and (V, k) weights (rows sum to 1).
        """
        H = self.params.height
        tau = 0.010 * H
        idx = {n: i for i, n in enumerate(bone_names)}
        B = len(bone_names)
        D = np.full((len(verts), B), np.inf)
        for pr in self._prims:
            if pr.bone is None:
                continue
            j = idx[pr.bone]
            D[:, j] = np.minimum(D[:, j], pr.sdf(verts))
        nbr = np.eye(B, dtype=bool)
        for j, pj in enumerate(parents):
            if pj >= 0:
                nbr[j, pj] = nbr[pj, j] = True
        for j, n in enumerate(bone_names):  # sibling fingers of one hand blend with each other
            if "_" in n and n.split("_")[1] in FINGERS:
                side = n.split("_")[0]
                for m, jj in idx.items():
                    if m.startswith(side + "_") and m.split("_")[1] in FINGERS and m.split("_")[1] != "thumb" \
                            and n.split("_")[1] != "thumb" and m[-1] == n[-1]:
                        nbr[j, jj] = True
        owner = np.argmin(D, 1)
        dmin = D[np.arange(len(verts)), owner]
        allowed = nbr[owner]
        # a vertex clearly on one side never follows the other side's bones (buttocks vs the other thigh)
        side = np.array([1 if n.startswith("left_") else -1 if n.startswith("right_") else 0 for n in bone_names])
        x = verts[:, 0] / H
        allowed &= ~(((x > 0.01)[:, None] & (side < 0)[None]) | ((x < -0.01)[:, None] & (side > 0)[None]))
        S = np.where(allowed, np.exp(-(D - dmin[:, None]) / tau), 0.0)
        order = np.argsort(-S, axis=1, kind="stable")[:, :k]
        wv = np.take_along_axis(S, order, 1)
        wv[wv < 1e-3] = 0.0
        wv /= wv.sum(1, keepdims=True)
        return order.astype(np.int64), wv


def _surface_nets(F, xs, ys, zs):
    """Naive surface nets on a rectilinear grid. F: (nx,ny,nz) field (<0 inside).

    Returns verts (V,3) (average of edge crossings per active cell) and quads (Q,4) outward-wound.
    """
    nx, ny, nz = F.shape
    inside = F < 0
    S = np.zeros((nx - 1, ny - 1, nz - 1, 3))
    N = np.zeros((nx - 1, ny - 1, nz - 1))
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    coords = np.stack([X, Y, Z], -1)
    crossings = []
    for a in range(3):
        sl0 = [slice(None)] * 3
        sl1 = [slice(None)] * 3
        sl0[a], sl1[a] = slice(0, -1), slice(1, None)
        f0, f1 = F[tuple(sl0)], F[tuple(sl1)]
        ch = inside[tuple(sl0)] != inside[tuple(sl1)]
        t = np.where(ch, f0 / np.where(ch, f0 - f1, 1.0), 0.0)
        p = coords[tuple(sl0)] + t[..., None] * (coords[tuple(sl1)] - coords[tuple(sl0)])
        p = p * ch[..., None]
        c = ch.astype(float)
        # an edge along axis a at (.., j, k) touches the 4 cells (.., j-1..j, k-1..k) of the other two axes
        b, cc = [ax for ax in range(3) if ax != a]
        for ob in (0, 1):
            for oc in (0, 1):
                sl = [slice(None)] * 3
                sl[b] = slice(ob, ob + (F.shape[b] - 1))
                sl[cc] = slice(oc, oc + (F.shape[cc] - 1))
                S += p[tuple(sl)]
                N += c[tuple(sl)]
        crossings.append((a, ch, f0 < 0))
    active = N > 0
    cell_id = -np.ones(active.shape, dtype=np.int64)
    cell_id[active] = np.arange(active.sum())
    verts = S[active] / N[active][:, None]
    quads = []
    for a, ch, lower_inside in crossings:
        b, c = [(1, 2), (2, 0), (0, 1)][a]
        # interior edges only (all 4 cells exist)
        idx = np.argwhere(ch)
        ok = (idx[:, b] >= 1) & (idx[:, b] <= F.shape[b] - 2) & (idx[:, c] >= 1) & (idx[:, c] <= F.shape[c] - 2)
        idx = idx[ok]
        if a == 0:
            pass
        cells = []
        for db, dc in ((-1, -1), (0, -1), (0, 0), (-1, 0)):
            q = idx.copy()
            q[:, b] += db
            q[:, c] += dc
            q[:, a] = np.minimum(q[:, a], F.shape[a] - 2)
            cells.append(cell_id[q[:, 0], q[:, 1], q[:, 2]])
        quad = np.stack(cells, 1)
        li = lower_inside[idx[:, 0], idx[:, 1], idx[:, 2]]
        quad[~li] = quad[~li][:, ::-1]
        quads.append(quad)
    quads = np.concatenate(quads, 0)
    # drop degenerate quads (can only happen at grid borders)
    quads = quads[(quads >= 0).all(1)]
    return verts, quads


def vertex_normals(verts, face_indices, face_offsets):
    """(V,3) unit area-weighted vertex normals of a polygon mesh (fan triangulation)."""
    sizes = np.diff(face_offsets)
    nrm = np.zeros_like(verts)
    for n in np.unique(sizes):
        starts = face_offsets[:-1][sizes == n]
        poly = np.stack([face_indices[starts + k] for k in range(n)], 1)
        fn = np.zeros((len(poly), 3))
        for k in range(1, n - 1):
            fn += np.cross(verts[poly[:, k]] - verts[poly[:, 0]], verts[poly[:, k + 1]] - verts[poly[:, 0]])
        for k in range(n):
            np.add.at(nrm, poly[:, k], fn)
    ln = np.linalg.norm(nrm, axis=1, keepdims=True)
    return nrm / np.maximum(ln, 1e-20)


# ----------------------------------------------------------------------------------------------- public


def canonical_skeleton(joints: dict, name: str) -> Skeleton:
    """Skeleton of the canonical bones present in ``joints`` ({name: (head, tail)}, armature = world)."""
    from .humanoid import CANONICAL_BONES

    names = [b for b in CANONICAL_BONES if b in joints]
    frames = _bone_frames({n: joints[n] for n in names})
    parents = []
    for n in names:
        p = CANONICAL_PARENT.get(n)
        while p is not None and p not in joints:
            p = CANONICAL_PARENT.get(p)
        parents.append(names.index(p) if p is not None else -1)
    rest_local = np.stack([frames[n] if parents[i] < 0 else np.linalg.inv(frames[names[parents[i]]]) @ frames[n]
                           for i, n in enumerate(names)])
    return Skeleton(name, names, parents, rest_local)


def body_model(params: BodyParams = BodyParams()):
    """The implicit body behind ``make_body`` (for tools that need its field, e.g. key-vertex rules)."""
    return _Body(params)


def make_body(params: BodyParams = BodyParams(), pose: str = "T"):
    """Generate a skinned humanoid.

    Args:
        params: morphology (``BodyParams``).
        pose: 'T' (arms horizontal) or 'A' (upper arms ``params.a_pose_angle`` below horizontal); the rest
            pose of the returned skeleton and mesh.
    Returns:
        (Skeleton, SkinnedMesh, bone_map): canonical skeleton (armature = world, identity object matrix),
        skinned quad mesh in the same space, and the identity bone map {canonical: bone}.
    """
    if pose not in ("T", "A"):
        raise CoreError(f"make_body: pose must be 'T' or 'A', got {pose!r}.")
    body = _Body(params)
    skel = canonical_skeleton(body.joints, params.name)
    verts, quads = body.mesh()
    wb, wv = body.weights(verts, skel.names, skel.parents)
    fi = quads.reshape(-1).astype(np.int64)
    fo = np.arange(0, len(fi) + 1, 4, dtype=np.int64)
    mesh = SkinnedMesh(f"{params.name}_body", verts, vertex_normals(verts, fi, fo), fi, fo, wb, wv)
    bone_map = {n: n for n in skel.names}
    if pose == "A":
        skel, mesh = _pose_arms(skel, mesh, params.a_pose_angle)
    return skel, mesh, bone_map


def _pose_arms(skel: Skeleton, mesh: SkinnedMesh, angle_deg: float):
    """Re-rest skeleton and mesh with the upper arms lowered by ``angle_deg`` (LBS)."""
    from .rotations import matrix_to_quat
    from .kinematics import forward_kinematics
    from .skinning import skin_mesh

    J = skel.num_bones
    G = skel.rest_global
    basis = np.tile(np.eye(3), (J, 1, 1))
    a = np.radians(angle_deg)
    for side, sgn in (("left", 1.0), ("right", -1.0)):
        c, s = np.cos(sgn * a), np.sin(sgn * a)
        W = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])  # rotation about +Y (forward axis)
        j = skel.index(f"{side}_upper_arm")
        R = G[j, :3, :3]
        basis[j] = R.T @ W @ R
    q = matrix_to_quat(basis)
    pose = forward_kinematics(skel, q, np.zeros((J, 3)))
    pos, _ = skin_mesh(skel, mesh, pose)
    newG = np.tile(np.eye(4), (J, 1, 1))
    newG[:, :3, :3] = pose.rotations.numpy()
    newG[:, :3, 3] = pose.positions.numpy()
    rest_local = np.stack([newG[j] if p < 0 else np.linalg.inv(newG[p]) @ newG[j] for j, p in enumerate(skel.parents)])
    new_skel = Skeleton(skel.name, skel.names, skel.parents, rest_local, skel.object_matrix)
    v = pos.numpy()
    new_mesh = replace(mesh, rest_verts=v, rest_normals=vertex_normals(v, mesh.face_indices, mesh.face_offsets))
    return new_skel, new_mesh


# ----------------------------------------------------------------------------------------------- fitting

_TORSO = ("hips", "spine", "chest", "upper_chest")
_CHAIN_CHILD = {"hips": "spine", "spine": "chest", "chest": "upper_chest", "upper_chest": "neck", "neck": "head"}
for _s in ("left", "right"):
    _CHAIN_CHILD.update({f"{_s}_shoulder": f"{_s}_upper_arm", f"{_s}_upper_arm": f"{_s}_lower_arm",
                         f"{_s}_lower_arm": f"{_s}_hand", f"{_s}_hand": f"{_s}_middle_1",
                         f"{_s}_upper_leg": f"{_s}_lower_leg", f"{_s}_lower_leg": f"{_s}_foot",
                         f"{_s}_foot": f"{_s}_toes"})
    for _f in FINGERS:
        _CHAIN_CHILD[f"{_s}_{_f}_1"] = f"{_s}_{_f}_2"
        _CHAIN_CHILD[f"{_s}_{_f}_2"] = f"{_s}_{_f}_3"


def standing_skeleton(skeleton: Skeleton, bone_map: dict) -> Skeleton:
    """The skeleton itself when its rest pose stands (``core.tpose.rest_is_standing``), else a copy whose
    object matrix is turned so that it does (hips -> head up, right -> left hip horizontal).

    Some BVH files (the Bandai-Namco set) have a rest pose lying on its side; the shared T-pose is built from
    the rest pose, so such skeletons are stood up first. Armature space is unchanged, so meshes and key
    vertices computed on the copy are valid for the original.
    """
    from .tpose import rest_is_standing

    if rest_is_standing(skeleton, bone_map):
        return skeleton
    G = skeleton.object_matrix @ skeleton.rest_global
    pos = {c: G[skeleton.index(b), :3, 3] for c, b in bone_map.items() if b in skeleton.names}
    if not all(c in pos for c in ("hips", "head", "left_upper_leg", "right_upper_leg")):
        return skeleton
    up = pos["head"] - pos["hips"]
    up /= np.linalg.norm(up)
    left = pos["left_upper_leg"] - pos["right_upper_leg"]
    left -= up * (left @ up)
    if np.linalg.norm(left) < 1e-9:
        return skeleton
    left /= np.linalg.norm(left)
    A = np.stack([left, np.cross(left, up), up], 1)
    B = np.stack([[1.0, 0, 0], np.cross([1.0, 0, 0], [0, 0, 1.0]), [0, 0, 1.0]], 1)
    R = np.eye(4)
    R[:3, :3] = B @ A.T
    return Skeleton(skeleton.name, skeleton.names, skeleton.parents, skeleton.rest_local, R @ skeleton.object_matrix)


def _tpose_world(skeleton: Skeleton, bone_map: dict, base=None):
    """World-space T-pose of a skeleton: (J,4,4) armature-space globals G_T, world heads (J,3), BodyFrame."""
    from .kinematics import forward_kinematics
    from .tpose import body_frame, tpose_basis

    q = tpose_basis(skeleton, bone_map, base)
    pose = forward_kinematics(skeleton, q, np.zeros((skeleton.num_bones, 3)))
    G = np.tile(np.eye(4), (skeleton.num_bones, 1, 1))
    G[:, :3, :3] = pose.rotations.numpy()
    G[:, :3, 3] = pose.positions.numpy()
    world = (skeleton.object_matrix @ G)[:, :3, 3]
    return G, world, body_frame(skeleton, bone_map, base)


def _axial_map(h_t, t_t, h_s, t_s, s, clamp=(0.35, 3.0)):
    """(4,4) affine map: template bone (h_t->t_t) onto source bone (h_s->t_s), radial scale s."""
    from .rotations import quat_between, quat_to_matrix

    u, w = t_t - h_t, t_s - h_s
    lu, lw = np.linalg.norm(u), np.linalg.norm(w)
    if lu < 1e-9 or lw < 1e-9:
        A = np.eye(4)
        A[:3, :3] *= s
        A[:3, 3] = h_s - s * h_t
        return A
    u, w = u / lu, w / lw
    a = float(np.clip(lw / lu, s * clamp[0], s * clamp[1]))
    D = s * np.eye(3) + (a - s) * np.outer(u, u)
    R = quat_to_matrix(quat_between(u, w))
    A = np.eye(4)
    A[:3, :3] = R @ D
    A[:3, 3] = h_s - A[:3, :3] @ h_t
    return A


def fit_body_to_skeleton(skeleton: Skeleton, bone_map: dict, template=None, base=None) -> SkinnedMesh:
    """Give a skeleton-only character a body: the template fitted to its proportions and skinned to it.

    The template (``core.keyverts.load_template``) is deformed bone by bone (affine maps taking each template
    bone onto the source bone in the shared T-pose: axial scale = bone length ratio, radial scale = body
    scale), skinned to the source bones through the bone map (canonical bones it lacks fall back to the nearest
    mapped ancestor), then brought from the T-pose back to the source's rest pose by inverse LBS.
    The mesh keeps the template's topology, so the template key vertices are valid on it as they are.

    Args:
        skeleton: the source Skeleton.
        bone_map: {canonical: bone name}; needs hips, head, both upper arms/legs at least.
        template: the Template to fit (default ``load_template(41)``).
        base: optional (J, 4) WXYZ basis rotations of a standing frame (e.g. the clip's first frame) to build
            the T-pose from, for skeletons whose rest pose is not a standing humanoid (Bandai-Namco BVH);
            without it such a rest pose is only turned upright (``standing_skeleton``).
    Returns:
        SkinnedMesh in the skeleton's armature space (rest pose), named '<armature>_fitted_body'.
    """
    if template is None:
        from .keyverts import load_template
        template = load_template(41)
    t_skel, t_mesh = template.skeleton, template.mesh
    names = skeleton.names
    have = {c: skeleton.index(b) for c, b in bone_map.items() if b in names and c in t_skel.names}
    missing = [c for c in ("hips", "head", "left_upper_arm", "right_upper_arm", "left_upper_leg",
                           "right_upper_leg", "left_lower_leg", "right_lower_leg", "left_foot", "right_foot",
                           "left_lower_arm", "right_lower_arm", "left_hand", "right_hand") if c not in have]
    if missing:
        raise CoreError(f"Armature '{skeleton.name}': cannot fit a body, the bone map lacks {', '.join(missing)}; "
                        f"map these bones first.")
    stood = standing_skeleton(skeleton, bone_map) if base is None else skeleton
    G_T, world, frame = _tpose_world(stood, bone_map, base)
    Rc = np.stack([frame.left, -frame.forward, frame.up], 1)  # template frame -> world
    src = {c: Rc.T @ world[j] for c, j in have.items()}       # source joints in template axes
    tG = t_skel.rest_global
    tj = {n: tG[i, :3, 3] for i, n in enumerate(t_skel.names)}

    def seg(a, b, pts):
        return np.linalg.norm(pts[a] - pts[b])
    s = (seg("hips", "head", src) + seg("left_upper_leg", "left_foot", src)) / \
        (seg("hips", "head", tj) + seg("left_upper_leg", "left_foot", tj))
    # fill unmapped canonical joints
    chain = ["hips", "spine", "chest", "upper_chest", "neck", "head"]
    known = [c for c in chain if c in src]
    for c in chain:
        if c in src:
            continue
        lo = max((k for k in known if chain.index(k) < chain.index(c)), key=chain.index)
        hi = min((k for k in known if chain.index(k) > chain.index(c)), key=chain.index)
        f = (tj[c][2] - tj[lo][2]) / max(tj[hi][2] - tj[lo][2], 1e-9)
        src[c] = src[lo] + f * (src[hi] - src[lo])
    for side in ("left", "right"):
        for c, anchor in ((f"{side}_shoulder", f"{side}_upper_arm"), (f"{side}_toes", f"{side}_foot")):
            if c not in src:
                src[c] = src[anchor] + (tj[c] - tj[anchor]) * s
        for f in FINGERS:
            for k in (1, 2, 3):
                c = f"{side}_{f}_{k}"
                if c not in src:
                    par = CANONICAL_PARENT[c]
                    src[c] = src[par] + (tj[c] - tj[par]) * s
    maps = {}
    torso = _axial_map(tj["hips"], tj["neck"], src["hips"], src["neck"], s, clamp=(0.6, 1.8))
    for c in t_skel.names:
        if c in _TORSO:
            maps[c] = torso
        elif c == "head":
            A = np.eye(4)
            A[:3, :3] *= s
            A[:3, 3] = src["head"] - s * tj["head"]
            maps[c] = A
        elif c in _CHAIN_CHILD and _CHAIN_CHILD[c] in src:
            child = _CHAIN_CHILD[c]
            clamp = (0.6, 1.8) if c == "neck" or c.endswith(("_hand", "_foot")) else (0.3, 3.0)
            maps[c] = _axial_map(tj[c], tj[child], src[c], src[child], s, clamp)
        else:  # chain ends (toes, distal finger bones): follow the parent's map, placed at this joint
            par = CANONICAL_PARENT[c]
            A = maps[par].copy()
            A[:3, 3] = src[c] - A[:3, :3] @ tj[c]
            maps[c] = A
    # blend the per-bone maps with the template skin weights (LBS of the template in template space)
    Ms = np.stack([maps[c] for c in t_skel.names])
    wb, wv = t_mesh.weight_bones, t_mesh.weight_values
    blend = (wv[..., None, None] * Ms[wb]).sum(1)                              # (V,4,4)
    v = np.einsum("vij,vj->vi", blend[:, :3, :3], t_mesh.rest_verts) + blend[:, :3, 3]
    # template axes -> world -> armature space (T-pose)
    p_world = v @ Rc.T
    inv_obj = np.linalg.inv(stood.object_matrix)
    v_T = p_world @ inv_obj[:3, :3].T + inv_obj[:3, 3]
    # skin weights on the source bones
    target = {}
    for c in t_skel.names:
        a = c
        while a is not None and a not in have:
            a = CANONICAL_PARENT.get(a)
        target[c] = have[a] if a is not None else have["hips"]
    col = np.array([target[c] for c in t_skel.names])
    J = skeleton.num_bones
    W = np.zeros((len(v), J))
    np.add.at(W, (np.repeat(np.arange(len(v)), wb.shape[1]), col[wb].ravel()), wv.ravel())
    K = min(4, J)
    nb = np.argsort(-W, axis=1, kind="stable")[:, :K]
    nv = np.take_along_axis(W, nb, 1)
    nv /= nv.sum(1, keepdims=True)
    # inverse LBS: T-pose -> rest pose
    S = G_T @ np.linalg.inv(skeleton.rest_global)                               # (J,4,4)
    Sb = (nv[..., None, None] * S[nb]).sum(1)
    v_rest = np.linalg.solve(Sb[:, :3, :3], (v_T - Sb[:, :3, 3])[..., None])[..., 0]
    fi, fo = t_mesh.face_indices, t_mesh.face_offsets
    return SkinnedMesh(f"{skeleton.name}_fitted_body", v_rest, vertex_normals(v_rest, fi, fo), fi.copy(), fo.copy(),
                       nb.astype(np.int64), nv)


def stretch_limbs(template, scales: dict) -> Character:
    """A copy of ``template`` (core.keyverts.Template) with arm / leg bones stretched along their axis.

    ``scales``: {canonical bone: factor} (upper/lower arms and legs). Each bone's map scales along the
    direction to its child's head; the maps are blended by the template's skin weights and each child follows
    its parent's map at its head, so the chain stays connected; the skeleton moves with the mesh. Built
    without ``fit_body_to_skeleton``: the known-answer copies of the key-vertex tests and report.
    """
    nxt = {"upper_arm": "lower_arm", "lower_arm": "hand", "upper_leg": "lower_leg", "lower_leg": "foot"}
    sk, m = template.skeleton, template.mesh
    G = sk.rest_global
    A, t, heads = np.tile(np.eye(3), (sk.num_bones, 1, 1)), np.zeros((sk.num_bones, 3)), G[:, :3, 3].copy()
    for j, c in enumerate(sk.names):
        p = sk.parents[j]
        if p >= 0:
            heads[j] = A[p] @ G[j, :3, 3] + t[p]
        if c in scales:
            side, _, part = c.partition("_")
            u = G[sk.index(f"{side}_{nxt[part]}"), :3, 3] - G[j, :3, 3]
            u /= np.linalg.norm(u)
            A[j] = np.eye(3) + (scales[c] - 1.0) * np.outer(u, u)
        t[j] = heads[j] - A[j] @ G[j, :3, 3]
    wb, wv = m.weight_bones, m.weight_values
    v = np.einsum("vk,vkij,vj->vi", wv, A[wb], m.rest_verts) + np.einsum("vk,vki->vi", wv, t[wb])
    G2 = G.copy()
    G2[:, :3, 3] = heads
    rest_local = np.stack([G2[j] if p < 0 else np.linalg.inv(G2[p]) @ G2[j] for j, p in enumerate(sk.parents)])
    mesh = replace(m, rest_verts=v, rest_normals=vertex_normals(v, m.face_indices, m.face_offsets))
    return Character(Skeleton("stretched", sk.names, sk.parents, rest_local), mesh, dict(template.bone_map))
