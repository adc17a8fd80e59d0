"""The mesh self-penetration and the contact depth (core.metrics.mesh_volume, core.metrics.contact_depth) on
hand-computed cases: two overlapping spheres (the lens volume), a box pressed 1 cm into another, a bent elbow
whose neighbouring parts touch at the joint."""

import numpy as np
import pytest
import torch
from scipy.spatial import cKDTree

from core.character.track import ClipTrack
from core.metrics import mesh_volume as mv
from core.metrics.contact_depth import MeshTally, contact_entries, mesh_scores
from core.progress import drive
from core.types import Character, KeyVertexSet, Motion, Skeleton, SkinnedMesh

CHAIN = ["hips", "spine", "chest", "left_shoulder", "left_upper_arm", "left_lower_arm", "left_hand"]


def icosphere(radius, centre, level=4):
    """(V, 3) vertices, (F, 3) triangles of a subdivided icosahedron."""
    t = (1 + 5 ** 0.5) / 2
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
         (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
         (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    v = [np.array(p, float) / np.linalg.norm(p) for p in v]
    for _ in range(level):
        mid, nf = {}, []

        def m(a, b):
            k = (min(a, b), max(a, b))
            if k not in mid:
                p = v[a] + v[b]
                v.append(p / np.linalg.norm(p))
                mid[k] = len(v) - 1
            return mid[k]
        for a, b, c in f:
            ab, bc, ca = m(a, b), m(b, c), m(c, a)
            nf += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        f = nf
    v = np.array(v)
    return centre + radius * v, np.array(f, np.int64), v


def box(lo, hi, n=20):
    """A closed box, each face an n × n grid, vertices shared along its edges with averaged normals (as a
    smooth-shaded mesh has them)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    verts, tris = [], []
    for axis in range(3):
        for side in (0, 1):
            u, w = [a for a in range(3) if a != axis]
            g = np.linspace(0, 1, n + 1)
            U, W = np.meshgrid(g, g, indexing="ij")
            p = np.zeros(U.shape + (3,))
            p[..., axis] = hi[axis] if side else lo[axis]
            p[..., u] = lo[u] + U * (hi[u] - lo[u])
            p[..., w] = lo[w] + W * (hi[w] - lo[w])
            idx = len(verts) + np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
            verts += list(p.reshape(-1, 3))
            for i in range(n):
                for j in range(n):
                    tris += [(idx[i, j], idx[i + 1, j], idx[i + 1, j + 1]), (idx[i, j], idx[i + 1, j + 1], idx[i, j + 1])]
    verts, inverse = np.unique(np.round(np.array(verts), 9), axis=0, return_inverse=True)
    tris = inverse.reshape(-1)[np.array(tris, np.int64)]
    centre = 0.5 * (lo + hi)
    fn = np.cross(verts[tris[:, 1]] - verts[tris[:, 0]], verts[tris[:, 2]] - verts[tris[:, 0]])
    fn *= np.sign(((verts[tris].mean(1) - centre) * fn).sum(1))[:, None]          # outward
    fn /= np.linalg.norm(fn, axis=1, keepdims=True)
    normals = np.zeros_like(verts)
    np.add.at(normals, tris.ravel(), np.repeat(fn, 3, axis=0))
    return verts, tris, normals / np.linalg.norm(normals, axis=1, keepdims=True)


def character(pieces, names=CHAIN, bone_map=None, offsets=None, weights=None, keyverts=None):
    """A Character whose bones ``names`` (a chain, rest frames = identity translated by ``offsets``) each carry
    the mesh pieces [(bone index, verts, tris, normals)] rigidly (or with ``weights`` (V, 2) bones and values)."""
    J = len(names)
    rest = np.tile(np.eye(4), (J, 1, 1))
    if offsets is not None:
        rest[:, :3, 3] = offsets
    sk = Skeleton("rig", names, np.arange(J) - 1, rest)
    V, F, N, WB = [], [], [], []
    for j, v, f, n in pieces:
        F.append(f + sum(len(x) for x in V))
        V.append(v)
        N.append(n)
        WB += [j] * len(v)
    verts, tris = np.concatenate(V), np.concatenate(F)
    wb, wv = (np.array(WB)[:, None], np.ones((len(verts), 1))) if weights is None else weights
    mesh = SkinnedMesh("body", verts, np.concatenate(N), tris.ravel(), np.arange(0, tris.size + 1, 3), wb, wv)
    kv = None if keyverts is None else KeyVertexSet(tuple(k[0] for k in keyverts), tuple(k[1] for k in keyverts),
                                                    np.array([k[2] for k in keyverts]))
    return Character(sk, mesh, bone_map or {n: n for n in names}, kv, 1.0)


def rest_depths(ch, **kw):
    surf = mv.setup(ch, probe_max=10 ** 6, surface_max=10 ** 6, **kw)
    x = torch.as_tensor(ch.mesh.rest_verts[surf.ids], dtype=torch.float32)[None]
    n = torch.as_tensor(ch.mesh.rest_normals[surf.ids], dtype=torch.float32)[None]
    return surf, mv.depths(surf, x, n, subtract_rest=False)


@pytest.mark.parametrize("d", [0.17, 0.15])
def test_two_overlapping_spheres_share_the_lens_volume(d):
    R = 0.1
    a, fa, na = icosphere(R, np.zeros(3))
    b, fb, nb = icosphere(R, np.array([d, 0, 0]))
    ch = character([(0, a, fa, na), (6, b, fb, nb)])         # hips and left hand: far apart in the tree
    surf, depth = rest_depths(ch)
    lens = np.pi * (4 * R + d) * (2 * R - d) ** 2 / 12
    assert float(mv.shared_volume(surf, depth)[0]) == pytest.approx(lens, rel=0.08)
    # the body's volume is the two balls' (the overlap counted twice by the divergence theorem)
    assert surf.volume == pytest.approx(2 * 4 / 3 * np.pi * R ** 3, rel=0.02)
    # apart, nothing is shared
    far = character([(0, a, fa, na), (6, b + [0.1, 0, 0], fb, nb)])
    assert float(mv.shared_volume(*rest_depths(far))[0]) == 0.0


def test_a_box_pressed_1_cm_into_another_reads_1_cm_deep():
    A, fA, nA = box([-0.2, -0.2, -0.2], [0.2, 0.2, 0.2])
    B, fB, nB = box([-0.05, -0.05, 0.25], [0.05, 0.05, 0.35])          # 5 cm above A at rest
    top = int(np.argmin(np.linalg.norm(A - [0, 0, 0.2], axis=1)))
    bottom = len(A) + int(np.argmin(np.linalg.norm(B - [0, 0, 0.25], axis=1)))
    ch = character([(0, A, fA, nA), (6, B, fB, nB)],
                   keyverts=[("torso_top", "torso", top), ("left_palm", "left_hand", bottom)])
    motion = Motion.rest(3, 7)
    motion.locations[1, 6] = (0, 0, -0.06)                         # frame 1: pressed 1 cm into A
    motion.locations[2, 6] = (0, 0, -0.05)                         # frame 2: resting on A
    track = ClipTrack(ch, motion)
    mm = drive(mv.mesh_measuring(track, ch.keyverts.vertex_ids, radius=0.05, read=np.ones((3, 2), bool)))
    depth = mm.key_depth
    np.testing.assert_allclose(depth[1], 0.01, atol=1e-4)
    np.testing.assert_allclose(depth[[0, 2]], 0.0, atol=1e-4)
    # only the entries asked for are read, and the volume is the same whichever are
    one = np.zeros((3, 2), bool)
    one[1, 1] = True
    few = drive(mv.mesh_measuring(track, ch.keyverts.vertex_ids, radius=0.05, read=one))
    np.testing.assert_allclose(few.key_depth, depth * one)
    np.testing.assert_array_equal(few.share, mm.share)
    # the hand's own touch is read when asked (the source's contacts): the palm on the box's top on frames 1, 2
    own = drive(mv.mesh_measuring(ClipTrack(ch, motion), ch.keyverts.vertex_ids, radius=0.05, own_touch=True))
    np.testing.assert_array_equal(own.hand_touch[:, 1], [False, True, True])
    np.testing.assert_allclose(own.key_depth[:, 1], depth[:, 1], atol=1e-6)
    # shared volume: a 10 × 10 cm × 1 cm slab over A's volume
    assert mm.share[1] == pytest.approx(0.1 * 0.1 * 0.01 / (0.4 ** 3 + 0.1 ** 3), rel=0.1)
    assert mm.share[0] == mm.share[2] == 0.0
    # the contact depth over the source's contact frames (the pair touches on frames 1 and 2)
    tally = MeshTally(3)
    truth = np.array([[False], [True], [True]])
    read = contact_entries(truth, (np.array([0]), np.array([1])), np.zeros((3, 2), bool))
    np.testing.assert_array_equal(read, [[False, False], [True, True], [True, True]])
    tally.add_contacts(read, depth, 0)
    tally.add(mm, 0, 3, 0)
    out = mesh_scores(MeshTally(3), tally, target_height=1.7)
    assert out["source_contact_frames"] == 2
    assert out["contact_depth_p95"] == pytest.approx(0.0095, abs=2e-4)       # 95 % of the way from 0 to 1 cm
    assert out["contact_depth_p95_height"] == pytest.approx(out["contact_depth_p95"] / 1.7)


def test_the_contact_depth_reads_every_surface_vertex_near_a_key_vertex(monkeypatch):
    """The contact depth is read on every vertex of the read surface within d_min of a key vertex
    (``mesh_volume.near_depths``), not only on the volume's stride of probes: with a single probe, far from the
    contact, the box pressed 1 cm into the other still reads 1 cm at both key vertices, and 0 where it rests."""
    monkeypatch.setattr(mv, "PROBE_MAX", 1)
    A, fA, nA = box([-0.2, -0.2, -0.2], [0.2, 0.2, 0.2])
    B, fB, nB = box([-0.05, -0.05, 0.25], [0.05, 0.05, 0.35])
    top = int(np.argmin(np.linalg.norm(A - [0, 0, 0.2], axis=1)))
    bottom = len(A) + int(np.argmin(np.linalg.norm(B - [0, 0, 0.25], axis=1)))
    ch = character([(0, A, fA, nA), (6, B, fB, nB)],
                   keyverts=[("torso_top", "torso", top), ("left_palm", "left_hand", bottom)])
    surf = mv.surfaces(ch, ch.keyverts.vertex_ids)[0]
    assert len(surf.probe) == 1 and np.linalg.norm(ch.mesh.rest_verts[surf.ids[surf.probe[0]]]) > 0.3
    motion = Motion.rest(3, 7)
    motion.locations[1, 6] = (0, 0, -0.06)
    motion.locations[2, 6] = (0, 0, -0.05)
    mm = drive(mv.mesh_measuring(ClipTrack(ch, motion), ch.keyverts.vertex_ids, 0.05, np.ones((3, 2), bool)))
    depth = mm.key_depth
    np.testing.assert_allclose(depth[1], 0.01, atol=1e-4)
    np.testing.assert_allclose(depth[[0, 2]], 0.0, atol=1e-4)


def test_the_surface_read_against_keeps_every_vertex_where_the_mesh_is_sparse():
    """The surface a depth is read against is one vertex per ``SAMPLE_CELL`` cube of the rest pose: a dense part (a
    face's or a hand's detail) is thinned, a sparse one kept whole, and every vertex has a kept one within a cell's
    diagonal. An index stride instead leaves holes where a mesh is sparse, and a point beside a hole reads as deep
    inside (docs/metrics.md "Mesh self-penetration")."""
    A, fA, nA = box([-0.1, -0.1, -0.1], [0.1, 0.1, 0.1], n=80)          # 2.5 mm apart: thinned
    B, fB, nB = icosphere(0.2, np.array([0.0, 0.0, 0.5]), level=2)      # about 5 cm apart: kept whole
    ch = character([(0, A, fA, nA), (6, B, fB, nB)])
    surf = mv.setup(ch)
    kept_A = surf.ids[surf.ids < len(A)]
    assert set(range(len(A), len(A) + len(B))) <= set(surf.ids.tolist())
    assert len(kept_A) < len(A) / 4
    d, _ = cKDTree(A[kept_A]).query(A)
    assert d.max() <= mv.SAMPLE_CELL * 3 ** 0.5


def test_a_bent_elbow_s_neighbouring_parts_never_count():
    # a closed tube along x, the upper arm's bone at 0, the forearm's at 0.25 m, blended over the elbow
    u = np.linspace(0, 0.5, 51)
    ang = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    U, A = np.meshgrid(u, ang, indexing="ij")
    r = 0.05
    verts = np.stack([U, r * np.cos(A), r * np.sin(A)], -1).reshape(-1, 3)
    normals = np.stack([0 * U, np.cos(A), np.sin(A)], -1).reshape(-1, 3)
    idx = np.arange(len(verts)).reshape(len(u), len(ang))
    tris = []
    for i in range(len(u) - 1):
        for k in range(len(ang)):
            k2 = (k + 1) % len(ang)
            tris += [(idx[i, k], idx[i + 1, k], idx[i + 1, k2]), (idx[i, k], idx[i + 1, k2], idx[i, k2])]
    w1 = np.clip((verts[:, 0] - 0.2) / 0.1, 0, 1)                     # the forearm's share, blended 20-30 cm
    weights = (np.stack([np.zeros(len(verts), int), np.ones(len(verts), int)], 1), np.stack([1 - w1, w1], 1))
    offsets = [(0, 0, 0), (0.25, 0, 0)]
    bend = Motion.rest(1, 2)
    bend.rotations[0, 1] = (np.cos(np.radians(75)), 0, 0, np.sin(np.radians(75)))   # 150° about z: folded back

    def share(names, bone_map):
        ch = character([(0, verts, np.array(tris), normals)], names=names, bone_map=bone_map, offsets=offsets,
                       weights=weights)
        return drive(mv.mesh_measuring(ClipTrack(ch, bend))).share[0]
    # upper arm and forearm share the elbow: the fold counts nothing
    assert share(["upper", "fore"], {"left_upper_arm": "upper", "left_lower_arm": "fore"}) == 0.0
    # the same fold read as two parts far apart in the tree counts: the measure sees it
    assert share(["upper", "fore"], {"left_upper_arm": "upper", "head": "fore"}) > 1e-3


def test_the_surface_memo_follows_every_module_constant(monkeypatch):
    """The set-ups kept per character (``mesh_volume.surfaces``, ``surface_fields.surface_fields``,
    ``partners.body_capsules``, ``bulges.bulge_points``) are kept per setting of their module's constants too
    (``memo.module_constants``): patching any of them, one a key never named included (``HOPS``, which decides the
    parts a probe is read against), gives a new set-up; the same settings, the kept one."""
    from core.character.memo import module_constants
    from core.solver import surface_fields as sf
    from tests.core.synth import make_humanoid
    assert module_constants({"GRID": 28, "_CACHE": {}, "helper": 1, "PROBES": 48}) == (("GRID", "28"), ("PROBES", "48"))
    ch = make_humanoid(name="memo")
    kv = ch.keyverts.vertex_ids
    first = mv.surfaces(ch, kv)
    assert mv.surfaces(ch, kv) is first
    monkeypatch.setattr(mv, "HOPS", mv.HOPS + 1)
    wider = mv.surfaces(ch, kv)
    assert wider is not first and (wider[0].allowed != first[0].allowed).any()
    fields = sf.surface_fields(ch)
    assert sf.surface_fields(ch) is fields
    monkeypatch.setattr(sf, "GRID", sf.GRID + 2)
    assert sf.surface_fields(ch) is not fields
    from core.metrics import partners
    from core.solver import bulges
    caps = partners.body_capsules(ch)
    points = bulges.bulge_points(ch, caps)
    assert partners.body_capsules(ch) is caps and bulges.bulge_points(ch, caps) is points
    monkeypatch.setattr(bulges, "BULGE_MIN", bulges.BULGE_MIN + 0.1)
    assert bulges.bulge_points(ch, caps) is not points
    monkeypatch.setattr(partners, "PARTNER_PEN_CORE", partners.PARTNER_PEN_CORE * 0.9)
    assert partners.body_capsules(ch) is not caps
