"""core.keyverts: template, OT plan, known-answer transfers, locking, several mesh parts."""

from dataclasses import replace

import numpy as np
import pytest

from core.body import BodyParams, fit_body_to_skeleton, make_body, stretch_limbs, vertex_normals
from core.errors import CoreError
from core.rig.humanoid import LIMBS, mirror_name
from core.keyverts import (area_weights, character_height, limb_labels, load_template, midplane_x, ot_limb,
                           pair_readout, reproportion_maps, tpose_geometry, transfer_keyverts)
from core.keyverts.ot import _cluster
from core.types import Character, KeyVertexSet, Skeleton, SkinnedMesh


@pytest.fixture(scope="module")
def tpl():
    return load_template(41)


@pytest.mark.parametrize("n", [41, 96])
def test_template_sets(n):
    t = load_template(n)
    kv = t.keyverts
    assert len(kv) == n and len(set(kv.names)) == n and len(set(kv.vertex_ids.tolist())) == n
    assert kv.eye == "face_center" and "face_center" in kv.names
    names = set(kv.names)
    assert all(mirror_name(x) in names for x in kv.names)                # mirrored pairs
    lab = limb_labels(t.skeleton, t.mesh, t.bone_map)
    assert [LIMBS[i] for i in lab[kv.vertex_ids]] == list(kv.limbs)      # each on its limb
    assert set(kv.limbs) == set(LIMBS)                                   # full coverage
    facing = (t.mesh.rest_normals[kv.vertex_ids] * t.directions).sum(1)
    assert (facing > 0.2).all()                                          # palm faces down, soles down, ...
    V = t.mesh.rest_verts[kv.vertex_ids]
    idx = {x: i for i, x in enumerate(kv.names)}
    mirrored = np.array([V[idx[mirror_name(x)]] * [-1, 1, 1] for x in kv.names])
    assert np.abs(mirrored - V).max() < 1e-6
    if n == 96:
        assert set(load_template(41).keyverts.names) <= names


def test_area_weights_sum_to_the_surface_area():
    verts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 0, 0]], float)
    fi = np.array([0, 1, 2, 3, 1, 4, 2])
    fo = np.array([0, 4, 7])
    w = area_weights(verts, fi, fo)
    assert w.sum() == pytest.approx(1.5)
    assert w[0] == pytest.approx(0.25) and w[4] == pytest.approx(0.5 / 3)


def test_ot_plan_marginals_and_determinism():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(700, 3)), rng.normal(size=(400, 3)) * [1.2, 0.8, 1.0]
    a, b = rng.uniform(0.5, 1.5, 700), rng.uniform(0.5, 1.5, 400)
    res = ot_limb(x, a, y, b, reg=0.2, max_points=300)
    P = res["plan"]
    assert len(res["a"]) <= 300 and len(res["b"]) <= 600
    assert res["a"].sum() == pytest.approx(1.0) and res["b"].sum() == pytest.approx(1.0)
    assert np.abs(P.sum(1) - res["a"]).sum() < 1e-4 and np.abs(P.sum(0) - res["b"]).sum() < 1e-4
    res2 = ot_limb(x, a, y, b, reg=0.2, max_points=300)
    assert np.array_equal(P, res2["plan"])
    # clustering keeps the mass and the weighted mean
    c, m, _ = _cluster(x, a / a.sum(), 100)
    assert m.sum() == pytest.approx(1.0) and np.allclose((m[:, None] * c).sum(0), (a[:, None] * x).sum(0) / a.sum())


@pytest.mark.parametrize("n", [41, 96])
def test_transfer_onto_itself_scaled_and_moved_copies_is_exact(n):
    tpl = load_template(n)
    ch = tpl.character
    kv = transfer_keyverts(ch, n, shortcut=False)
    assert np.array_equal(kv.vertex_ids, tpl.keyverts.vertex_ids)
    assert kv.names == tpl.keyverts.names and kv.limbs == tpl.keyverts.limbs
    sk = tpl.skeleton
    c, s = np.cos(0.7), np.sin(0.7)
    M = np.array([[1.4 * c, -1.4 * s, 0, 3.0], [1.4 * s, 1.4 * c, 0, -2.0], [0, 0, 1.4, 0.3], [0, 0, 0, 1]])
    moved = Character(Skeleton("moved", sk.names, sk.parents, sk.rest_local, M), tpl.mesh, tpl.bone_map)
    assert np.array_equal(transfer_keyverts(moved, n, shortcut=False).vertex_ids, tpl.keyverts.vertex_ids)
    assert character_height(moved) == pytest.approx(1.4 * np.ptp(tpl.mesh.rest_verts[:, 2]))


def test_reproportioning_the_template_is_the_identity(tpl):
    pos, _, _, heads = tpose_geometry(tpl.character, joints=True)
    area = area_weights(pos, tpl.mesh.face_indices, tpl.mesh.face_offsets)
    Ls, ts = reproportion_maps(tpl.skeleton, tpl.mesh, tpl.bone_map, heads, pos, area, tpl)
    assert np.abs(Ls - np.eye(3)).max() < 1e-6 and np.abs(ts).max() < 1e-6


@pytest.mark.slow
def test_transfer_is_deterministic_and_keeps_locked(tpl):
    skA, mA, bmA = make_body(BodyParams(name="a"), pose="A")
    ch = Character(skA, mA, bmA)
    k1, k2 = transfer_keyverts(ch), transfer_keyverts(ch)
    assert np.array_equal(k1.vertex_ids, k2.vertex_ids)
    locked = np.zeros(len(k1), bool)
    locked[[0, 5]] = True
    ids = k1.vertex_ids.copy()
    ids[0], ids[5] = 17, 23
    prev = KeyVertexSet(k1.names, k1.limbs, ids, locked)
    k3 = transfer_keyverts(ch, locked=prev)
    assert k3.vertex_ids[0] == 17 and k3.vertex_ids[5] == 23 and k3.locked[[0, 5]].all()
    assert np.array_equal(np.delete(k3.vertex_ids, [0, 5]), np.delete(k1.vertex_ids, [0, 5]))


STRETCHED = [(BodyParams(name="template"), "A"),
             (BodyParams(arm_length=1.3, leg_length=1.25, name="long"), "T"),
             (BodyParams(arm_length=1.3, leg_length=1.25, name="long"), "A"),
             (BodyParams(arm_length=0.85, leg_length=1.1, name="short_arms"), "T"),
             (BodyParams(arm_length=0.85, leg_length=1.1, name="short_arms"), "A")]


@pytest.mark.slow
@pytest.mark.parametrize("params,pose", STRETCHED, ids=[f"{p.name}-{pose}" for p, pose in STRETCHED])
def test_transfer_onto_posed_and_stretched_copies_lands_on_the_same_vertices(params, pose):
    """The template re-rested in A-pose and fitted to skeletons with stretched limbs (core.body.
    fit_body_to_skeleton, same topology): the OT itself (shortcut=False) lands on the template's vertices."""
    sk, _, bm = make_body(params, pose=pose)
    ch = Character(sk, fit_body_to_skeleton(sk, bm), bm)
    for n in (41, 96):
        t = load_template(n)
        assert np.array_equal(transfer_keyverts(ch, n).vertex_ids, t.keyverts.vertex_ids)       # known topology
        kv = transfer_keyverts(ch, n, shortcut=False)                                           # the OT itself
        wrong = [kv.names[i] for i in np.nonzero(kv.vertex_ids != t.keyverts.vertex_ids)[0]]
        assert not wrong, (params.name, pose, n, wrong)


_stretched_copy = stretch_limbs   # core.body: limbs stretched along their bones (known answers)


@pytest.mark.parametrize("n", [41, 96])
def test_transfer_onto_geometrically_stretched_copies_lands_on_the_same_vertices(n):
    """Second construction: the template's own mesh with arm and leg bones stretched by different factors
    (upper vs lower segment), legs longer than the body scale assumes; exact through the OT too."""
    t = load_template(n)
    for f in ({"upper_arm": 1.3, "lower_arm": 1.3},
              {"upper_arm": 1.4, "lower_arm": 1.1, "upper_leg": 1.2, "lower_leg": 1.3},
              {"upper_arm": 0.85, "upper_leg": 1.1, "lower_leg": 0.9}):
        ch = _stretched_copy(t, {f"{side}_{b}": x for b, x in f.items() for side in ("left", "right")})
        kv = transfer_keyverts(ch, n, shortcut=False)
        wrong = [kv.names[i] for i in np.nonzero(kv.vertex_ids != t.keyverts.vertex_ids)[0]]
        assert not wrong, (f, wrong)
        if f.get("lower_arm") == 1.1:   # without re-proportioning, per-limb normalisation cannot undo it
            plain = transfer_keyverts(ch, n, shortcut=False, reproportion=False)
            assert np.mean(plain.vertex_ids == t.keyverts.vertex_ids) < 0.9


@pytest.mark.slow
def test_transfer_on_another_morphology_keeps_limbs_sides_and_symmetry(tpl):
    from core.body import SHORT_HEAVY
    sk, m, bm = make_body(SHORT_HEAVY, pose="A")
    ch = Character(sk, m, bm)
    kv = transfer_keyverts(ch, 96)
    t96 = load_template(96)
    pos, nrm, _ = tpose_geometry(ch)
    lab = limb_labels(sk, m, bm)
    assert [LIMBS[i] for i in lab[kv.vertex_ids]] == list(kv.limbs)
    assert ((nrm[kv.vertex_ids] * t96.directions).sum(1) > 0).mean() > 0.95
    H = character_height(ch)
    idx = {x: i for i, x in enumerate(kv.names)}
    P = pos[kv.vertex_ids]
    asym = [np.linalg.norm(P[i] * [-1, 1, 1] - P[idx[mirror_name(x)]]) / H for i, x in enumerate(kv.names)]
    assert max(asym) < 0.03


def test_pair_readout_breaks_a_tie_symmetrically():
    """Two candidates per side, equally near their barycentric points (up to 1e-9): reading each side alone
    picks the upper one on the left and the lower one on the right; the joint read-out picks a mirror pair
    about the midplane x = 0.5 (any λ > 0); a clear preference of each side still wins over the asymmetry."""
    pos = np.array([[1.5, 0.0, 0.1], [1.5, 0.0, -0.1],        # left candidates (x = 0.5 + 1)
                    [-0.5, 0.0, 0.1], [-0.5, 0.0, -0.1]])     # right candidates, their mirrors about x = 0.5
    cl, cr = np.array([0, 1]), np.array([2, 3])
    dl, dr = np.array([1.0, 1.0 + 1e-9]), np.array([1.0 + 1e-9, 1.0])
    assert (cl[np.argmin(dl)], cr[np.argmin(dr)]) == (0, 3)                     # alone: not mirrored
    for lam in (0.01, 1.0, 100.0):
        assert pair_readout(cl, dl, cr, dr, pos, 0.5, 1.0, lam) == (0, 2)       # mirrored
    assert pair_readout(cl, dl, cr, dr, pos, 0.0, 1.0, 1.0) in ((0, 2), (1, 3))   # plane x = 0: same heights
    far = np.array([2.0, 1.0])                                                  # right side clearly prefers 3
    assert pair_readout(cl, dl, cr, far, pos, 0.5, 1.0, 1.0) == (1, 3)         # left follows it (tie on the left)
    assert pair_readout(cl, np.array([1.0, 2.0]), cr, far, pos, 0.5, 1.0, 0.1) == (0, 3)   # both kept: λ small


def test_mirrored_pairs_are_exactly_symmetric_on_a_symmetric_coarse_body():
    """The generator's bodies are exactly mirror-symmetric; on a coarse one (~1.7k vertices) reading each side
    alone flips near ties differently on the two sides (the OT atoms are not mirror-symmetric); the joint
    read-out of the pairs (default) gives exactly mirrored pairs, the midplane is x = 0, and every key vertex
    stays on its limb, facing its direction."""
    sk, m, bm = make_body(BodyParams(resolution=0.024, name="lowpoly"), pose="A")
    ch = Character(sk, m, bm)
    pos, nrm, _, heads = tpose_geometry(ch, joints=True)
    assert abs(midplane_x(sk, bm, heads, pos)) < 1e-9
    H = character_height(ch)
    lab = limb_labels(sk, m, bm)
    for n in (41, 96):
        t = load_template(n)
        idx = {x: i for i, x in enumerate(t.keyverts.names)}

        def asym(kv):
            P = pos[kv.vertex_ids]
            return np.array([np.linalg.norm(P[i] * [-1, 1, 1] - P[idx[mirror_name(x)]]) / H
                             for i, x in enumerate(kv.names)])
        kv = transfer_keyverts(ch, n)
        assert asym(kv).max() < 1e-9, n
        assert asym(transfer_keyverts(ch, n, mirror=0)).max() > 0.01, n          # each side alone: flips
        assert [LIMBS[i] for i in lab[kv.vertex_ids]] == list(kv.limbs)
        assert ((nrm[kv.vertex_ids] * t.directions).sum(1) > 0).all()
    # a pair with one member locked: the other is read out on its own, as with mirror=0
    alone = transfer_keyverts(ch, 96, mirror=0)
    k, km = idx["left_thigh_inner"], idx["right_thigh_inner"]
    lock = np.zeros(96, bool)
    lock[k] = True
    kv = transfer_keyverts(ch, 96, locked=KeyVertexSet(kv.names, kv.limbs, kv.vertex_ids, lock))
    assert kv.vertex_ids[k] == transfer_keyverts(ch, 96).vertex_ids[k] and kv.vertex_ids[km] == alone.vertex_ids[km]


def _thickened(params, pose, factors):
    """A generated body with bones thickened radially ({bone: factor}, skin-weighted): asymmetric mesh."""
    sk, m, bm = make_body(params, pose=pose)
    W, G, v = m.dense_weights(sk.num_bones), sk.rest_global, m.rest_verts.copy()
    for bone, f in factors.items():
        j = sk.index(bone)
        rel = v - G[j, :3, 3]
        v += (f - 1) * W[:, j:j + 1] * (rel - np.outer(rel @ G[j, :3, 1], G[j, :3, 1]))
    return Character(sk, replace(m, rest_verts=v, rest_normals=vertex_normals(v, m.face_indices, m.face_offsets)), bm)


@pytest.mark.slow
def test_joint_readout_keeps_asymmetric_meshes_their_own_answers():
    """Asymmetric meshes. (1) The template with the left arm and the right leg stretched (other side
    unchanged): the answer is still the template's own vertices, found exactly through the OT (the pairs'
    asymmetry is judged on the re-proportioned mesh, where both arms have the template's lengths).
    (2) The heavy body with the left arm and leg 25 % thicker and the right hand 15 % larger: every key vertex
    on its limb, facing its direction, at most about one edge (< 2 % h) from where each side alone puts it, and
    the thick limbs' pairs stay as asymmetric as the body (> 1 % h)."""
    from core.body import SHORT_HEAVY
    for n in (41, 96):
        t = load_template(n)
        for f in ({"left_upper_arm": 1.3, "left_lower_arm": 1.3},
                  {"left_upper_arm": 1.4, "left_lower_arm": 1.1, "right_upper_leg": 1.2, "right_lower_leg": 1.3}):
            kv = transfer_keyverts(_stretched_copy(t, f), n, shortcut=False)
            wrong = [kv.names[i] for i in np.nonzero(kv.vertex_ids != t.keyverts.vertex_ids)[0]]
            assert not wrong, (f, wrong)
    ch = _thickened(SHORT_HEAVY, "A", {"left_upper_arm": 1.25, "left_lower_arm": 1.25, "left_upper_leg": 1.25,
                                       "left_lower_leg": 1.25, "right_hand": 1.15})
    pos, nrm, _ = tpose_geometry(ch)
    H = character_height(ch)
    lab = limb_labels(ch.skeleton, ch.mesh, ch.bone_map)
    t = load_template(96)
    kv, alone = transfer_keyverts(ch, 96), transfer_keyverts(ch, 96, mirror=0)
    assert [LIMBS[i] for i in lab[kv.vertex_ids]] == list(kv.limbs)
    assert ((nrm[kv.vertex_ids] * t.directions).sum(1) > 0).all()
    moved = np.linalg.norm(pos[kv.vertex_ids] - pos[alone.vertex_ids], axis=1) / H
    assert 0 < (moved > 0).sum() <= 12 and moved.max() < 0.02
    idx = {x: i for i, x in enumerate(kv.names)}
    P = pos[kv.vertex_ids]
    for pair in ("knee", "calf", "thigh_front"):
        assert np.linalg.norm(P[idx["left_" + pair]] * [-1, 1, 1] - P[idx["right_" + pair]]) > 0.01 * H, pair


def _sphere(center, r, n=12):
    u, v = np.meshgrid(np.linspace(0.2, np.pi - 0.2, n), np.linspace(0, 2 * np.pi, n, endpoint=False))
    p = np.stack([np.sin(u) * np.cos(v), np.sin(u) * np.sin(v), np.cos(u)], -1).reshape(-1, 3)
    q = []
    for i in range(n):
        for j in range(n - 1):
            a, b = i * n + j, ((i + 1) % n) * n + j
            q.append([a, b, b + 1, a + 1])
    return center + r * p, np.array(q)


def _merge(parts, names):
    """parts: [(verts, quads, weight_bones, weight_values)] -> one SkinnedMesh with ``part`` labels."""
    from core.body import vertex_normals
    offs = np.cumsum([0] + [len(p[0]) for p in parts])
    v = np.concatenate([p[0] for p in parts])
    fi = np.concatenate([p[1] + o for p, o in zip(parts, offs)]).ravel()
    fo = np.arange(0, len(fi) + 1, 4)
    return SkinnedMesh("merged", v, vertex_normals(v, fi, fo), fi, fo, np.concatenate([p[2] for p in parts]),
                       np.concatenate([p[3] for p in parts]),
                       np.concatenate([np.full(len(p[0]), i) for i, p in enumerate(parts)]), names)


def _subset(mesh, keep, offset=0.0):
    q = mesh.face_indices.reshape(-1, 4)
    remap = -np.ones(mesh.num_verts, int)
    remap[keep] = np.arange(keep.sum())
    return (mesh.rest_verts[keep] + mesh.rest_normals[keep] * offset, remap[q[keep[q].all(1)]],
            mesh.weight_bones[keep], mesh.weight_values[keep])


def test_several_mesh_parts_put_key_vertices_on_the_body(tpl):
    """Body + a shirt shell (torso and arms) + two eyes + a hand-held prop: key vertices stay on the body;
    with the body deleted under the shirt, the torso and arm key vertices go to the shirt."""
    body, sk = tpl.mesh, tpl.skeleton
    K = body.weight_bones.shape[1]
    lab = limb_labels(sk, body, tpl.bone_map)
    covered = np.isin(lab, [LIMBS.index(x) for x in ("torso", "left_arm", "right_arm")])
    G = sk.rest_global
    head, hand = sk.index("head"), sk.index("left_hand")
    extras = []
    for c, r, bone in ((G[head, :3, 3] + [0.03, -0.08, 0.05], 0.012, head),
                       (G[head, :3, 3] + [-0.03, -0.08, 0.05], 0.012, head),
                       (G[hand, :3, 3] + [0.05, 0, -0.06], 0.04, hand)):
        v, q = _sphere(np.asarray(c), r)
        extras.append((v, q, np.full((len(v), K), bone), np.eye(1, K).repeat(len(v), 0)))
    shirt = _subset(body, covered, 0.01)
    names = ("body", "shirt", "eye_l", "eye_r", "prop")
    full = _merge([_subset(body, np.ones(body.num_verts, bool)), shirt] + extras, names)
    kv = transfer_keyverts(Character(sk, full, tpl.bone_map), shortcut=False)
    assert (full.part[kv.vertex_ids] == 0).all()
    assert np.array_equal(kv.vertex_ids, tpl.keyverts.vertex_ids)
    cut = _merge([_subset(body, ~covered), shirt] + extras, names)
    kv = transfer_keyverts(Character(sk, cut, tpl.bone_map), shortcut=False)
    on_shirt = np.array([lb in ("torso", "left_arm", "right_arm") for lb in kv.limbs])
    assert (cut.part[kv.vertex_ids][on_shirt] == 1).all() and (cut.part[kv.vertex_ids][~on_shirt] == 0).all()


def test_meshless_character_is_refused():
    t = load_template(41)
    with pytest.raises(CoreError, match="no mesh"):
        transfer_keyverts(Character(t.skeleton, None, t.bone_map))
    with pytest.raises(CoreError, match="41 or 96"):
        load_template(40)
