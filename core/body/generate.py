"""Parametric skinned humanoid on the canonical skeleton (pure numpy): ``make_body``.

The body is an implicit surface (``_Body``): the smooth union of the primitives of ``layout`` meshed with
surface nets (``mesher``) and projected onto the exact implicit surface, with smooth skin weights (exponential
falloff of the distance to each bone's primitives, restricted to skeletal neighbours). A T-posed neutral body is
the key-vertex template (ReConForM §3.1, ``core.keyverts.template``); ``pose='A'`` re-rests it with the arms
lowered (``_pose_arms``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import CoreError
from ..rig.humanoid import CANONICAL_BONES, CANONICAL_PARENT, FINGERS
from ..rig.kinematics import forward_kinematics
from ..rig.rotations import matrix_to_quat
from ..rig.skinning import skin_mesh
from ..types import Skeleton, SkinnedMesh
from .layout import BodyParams, _joint_layout, _primitives
from .mesher import _surface_nets, vertex_normals
from .shapes import _smin


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


def canonical_skeleton(joints: dict, name: str) -> Skeleton:
    """Skeleton of the canonical bones present in ``joints`` ({name: (head, tail)}, armature = world)."""
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


__all__ = ["body_model", "canonical_skeleton", "make_body"]
