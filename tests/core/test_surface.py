"""core.solver.surface: the body's surface as signed distance fields carried by its bones, read at hand probes."""

import numpy as np
import pytest
import torch

from core.body import BodyParams, make_body
from core.rig.rotations_np import quat_to_matrix
from core.character.track import ClipTrack
from core.solver.surface import ALLOW, SurfaceBarrier, SurfaceGate, seen_pairs, source_allowance, surface_depths
from core.solver.surface_fields import surface_fields, world_points
from core.types import Motion
from core.types import Character


@pytest.fixture(scope="module")
def body():
    skel, mesh, bone_map = make_body(BodyParams(name="surface_test", belly=1.2), pose="T")
    ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
    return ch, surface_fields(ch)


def rest_points(ch, fields) -> np.ndarray:
    """(4F + Q, 3) world positions of the carried points with the character in its rest (bind) pose."""
    bones, local = fields.carried_points()
    G = ch.skeleton.object_matrix @ ch.skeleton.rest_global[bones]                        # (P, 4, 4)
    return (G[:, :3, :3] @ local[..., None])[..., 0] + G[:, :3, 3]


def torso_front(ch) -> np.ndarray:
    """Vertex ids of the front of the belly and chest (normals facing forward, near the middle)."""
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    return np.nonzero((N[:, 1] < -0.9) & (np.abs(V[:, 0]) < 0.1) & (V[:, 2] > 0.4 * ch.height)
                      & (V[:, 2] < 0.75 * ch.height))[0]


def belly_front(ch, top: float = 1.0) -> int:
    """The vertex farthest forward among those facing forward near the middle, from 45 % of the height up to ``top``
    of it: the belly's front."""
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    front = np.nonzero((N[:, 1] < -0.95) & (np.abs(V[:, 0]) < 0.03) & (V[:, 2] > 0.45 * ch.height)
                       & (V[:, 2] < top * ch.height))[0]
    return int(front[np.argmin(V[front, 1])])


def test_fields_cover_the_torso_and_head_and_probe_the_hands(body):
    ch, f = body
    assert f is not None
    assert {"hips", "spine", "chest", "head"} <= set(f.field_names)
    assert {"left_hand", "right_hand", "left_lower_arm", "right_lower_arm", "left_upper_arm",
            "right_upper_arm", "chest"} == set(f.probe_names)
    chest = f.probe_names.index("chest")
    assert f.tested[chest, f.field_names.index("left_upper_arm")]          # a breast pressed into an arm
    assert not f.tested[chest, f.field_names.index("spine")]                # its own neighbours
    hand = f.probe_names.index("left_hand")
    assert f.tested[hand, f.field_names.index("chest")]
    assert f.tested[f.probe_names.index("left_lower_arm"), f.field_names.index("hips")]
    assert f.tested[f.probe_names.index("left_upper_arm"), f.field_names.index("chest")]   # an arm against a chest
    assert f.tested[hand, f.field_names.index("right_hand")]                  # hands that hold each other
    assert not f.tested[hand, f.field_names.index("left_lower_arm")]          # its own wrist: neighbours
    assert not f.tested[hand, f.field_names.index("left_hand")]


def test_seen_pairs_are_the_probe_and_field_pairs_the_barrier_tests(body):
    """``seen_pairs``' [a, b]: a's segment is thin (a hand) and key vertex b's segment probes its field, which the
    barrier tests, so the mesh's depth (not L_pen's half-space) keeps b out of a's part: the other hand or a forearm
    in a hand, never its own hand or its own forearm; a hand in the trunk is left to both (behind a trunk's surface is
    inside it); nothing where b's segment carries no probes (a foot) or a's has no field (a foot)."""
    from types import SimpleNamespace
    from core.rig.parts import vertex_segments
    ch, f = body
    seg, names, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    parts = ["left_hand", "right_hand", "left_lower_arm", "spine", "left_foot"]
    kv = [int(np.nonzero(seg == names.index(n))[0][0]) for n in parts]
    job = SimpleNamespace(target=ch, surface=SimpleNamespace(fields=f), device="cpu")
    seen = seen_pairs(job, kv).numpy()
    k = {n: i for i, n in enumerate(parts)}
    assert seen.shape == (len(parts), len(parts)) and seen.dtype == bool
    assert seen[k["right_hand"], k["left_hand"]] and seen[k["left_hand"], k["right_hand"]]   # hands holding
    assert seen[k["right_hand"], k["left_lower_arm"]]                                          # a wrist in a hand
    assert not seen[k["spine"], k["left_hand"]] and not seen[k["left_lower_arm"], k["right_hand"]]  # thick parts
    assert not seen[k["left_hand"], k["spine"]]                              # the trunk's surface carries no probes
    assert not seen[k["left_hand"], k["left_hand"]] and not seen[k["left_hand"], k["left_lower_arm"]]  # neighbours
    assert not seen[:, k["left_foot"]].any() and not seen[k["left_foot"]].any()


def test_a_probe_pressed_into_the_belly_reads_its_depth(body):
    """A hand probe moved onto a belly vertex and pushed 0, 1, 2.5 cm inwards along its normal reads that depth
    (within a few millimetres: the field is trilinear on a grid of about 1.5 cm); in the rest T-pose, no probe is
    inside the body."""
    ch, f = body
    pts = rest_points(ch, f)
    F = f.num_fields
    assert surface_depths(f, torch.as_tensor(pts)[None]).abs().max() == 0.0
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    v = belly_front(ch, top=0.6)
    q = 4 * F + f.probe_names.index("right_hand")
    for depth in (0.0, 0.01, 0.025):
        moved = pts.copy()
        moved[q] = V[v] - depth * N[v]
        d = surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * F]
        assert float(d.max()) == pytest.approx(depth, abs=0.004), depth


def test_a_chest_probe_pressed_into_an_upper_arm_reads_its_depth(body):
    """The other side of an arm against a chest: a chest probe moved onto the outside of the left upper arm and pushed
    1 and 2 cm in reads that depth in the arm's field, where a breast pressed into an arm between the arm's own probes
    is seen (docs/decisions.md "The chest probes the upper arms")."""
    from core.rig.parts import vertex_segments
    ch, f = body
    pts = rest_points(ch, f)
    F = f.num_fields
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    seg, names, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    arm = np.nonzero(seg == names.index("left_upper_arm"))[0]
    below = arm[N[arm, 2] < -0.9]                                       # the T-posed arm's underside
    v = below[np.argmin(np.abs(V[below, 0] - np.median(V[arm, 0])))]    # halfway along it
    q = 4 * F + f.probe_names.index("chest")
    for depth in (0.01, 0.02):
        moved = pts.copy()
        moved[q] = V[v] - depth * N[v]
        d = surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * F]
        assert float(d[f.field_names.index("left_upper_arm")]) == pytest.approx(depth, abs=0.004), depth


def test_depths_follow_the_bones_rigidly(body):
    """The same pose turned and moved as a whole reads the same depths (the fields ride on their bones)."""
    ch, f = body
    pts = rest_points(ch, f)
    F = f.num_fields
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    chest = np.argmax(np.where(np.abs(V[:, 0]) < 0.05, V[:, 2] * (N[:, 1] < -0.9), -np.inf))
    q = 4 * F + f.probe_names.index("left_hand")
    pts[q] = V[chest] - 0.015 * N[chest]
    R = quat_to_matrix(np.array([np.cos(0.4), 0.3 * np.sin(0.4), -0.2 * np.sin(0.4), 0.93 * np.sin(0.4)]))
    R /= np.cbrt(np.linalg.det(R))
    moved = pts @ R.T + [0.3, -1.2, 0.05]
    a = surface_depths(f, torch.as_tensor(pts)[None])
    b = surface_depths(f, torch.as_tensor(moved)[None])
    assert a.max() > 0.01
    assert torch.allclose(a, b, atol=1e-6)


def test_the_barrier_pushes_a_sunk_hand_out_along_the_normal(body):
    ch, f = body
    pts = torch.as_tensor(rest_points(ch, f), dtype=torch.float64)
    F = f.num_fields
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    v = belly_front(ch)
    q = 4 * F + f.probe_names.index("right_hand")
    pts[q] = torch.as_tensor(V[v] - 0.02 * N[v])
    pts.requires_grad_(True)
    allow = torch.full((1, len(f.probe_bone), F), ALLOW * f.height, dtype=torch.float64)
    barrier = SurfaceBarrier(f, 1.0, allow, dtype=torch.float64)
    loss = barrier.weighted(pts[None])
    assert loss > 0
    loss.backward()
    g = pts.grad[q].numpy()
    assert np.dot(-g, N[v]) > 0.9 * np.linalg.norm(g)           # descent moves the probe out, along the normal
    with torch.no_grad():                                         # resting on the skin costs nothing
        pts[q] = torch.as_tensor(V[v] - 0.5 * ALLOW * ch.height * N[v])
    assert barrier.weighted(pts[None]) == 0


def test_the_barrier_records_the_probes_that_touch_and_the_gate_holds_their_pairs(body):
    """A hand probe 1 cm into the belly: the barrier's last evaluation (``record_touching``) records that probe inside
    the belly's field and nothing else (rest T-pose); the contact state's SurfaceGate then holds a pair of a key
    vertex near that probe and a belly key vertex, either way round, and not a pair of it and the head, nor of a key
    vertex far from the probe and the belly; before an evaluation, or after ``reset``, it holds none."""
    from core.descriptors.weights import PairSet
    ch, f = body
    pts = torch.as_tensor(rest_points(ch, f), dtype=torch.float64)
    F = f.num_fields
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    v = belly_front(ch, top=0.6)
    q = f.probe_names.index("right_hand")
    allow = torch.full((1, len(f.probe_bone), F), ALLOW * f.height, dtype=torch.float64)
    barrier = SurfaceBarrier(f, 1.0, allow, dtype=torch.float64)
    barrier.weighted(pts[None])
    assert barrier.touching is None                               # recorded only for a gate
    barrier.record_touching = True
    barrier.weighted(pts[None])
    assert len(barrier.touching[0]) == 0                          # the rest T-pose: nothing touches
    pts[4 * F + q] = torch.as_tensor(V[v] - 0.01 * N[v])
    belly = int(surface_depths(f, pts[None])[0, q].argmax())
    barrier.weighted(pts[None])
    assert [x.tolist() for x in barrier.touching] == [[0], [q], [belly]]
    # key vertices: 0 near probe q, 1 on the belly's segment, 2 on the head, 3 on the right hand far from probe q
    probe_keys = torch.full((len(f.probe_bone), 1), -1)
    probe_keys[q, 0] = 0
    field = torch.tensor([f.field_names.index("right_hand"), belly, f.field_names.index("head"),
                          f.field_names.index("right_hand")])
    gate = SurfaceGate(barrier, probe_keys, field, 1)
    one = torch.ones(4, dtype=torch.float64)
    ps = PairSet(torch.zeros(4, dtype=torch.long), torch.tensor([0, 1, 0, 3]), torch.tensor([1, 0, 2, 1]), one,
                 torch.zeros((4, 3), dtype=torch.float64), one, one, one, one, one, one)
    assert gate.held(ps).tolist() == [True, True, False, False]
    gate.reset()
    assert gate.held(ps).tolist() == [False, False, False, False]


def test_the_source_allowance_follows_the_sources_own_depth(body, monkeypatch):
    """The carried points read from a clip's track are the rest points at the rest pose; there no hand is in the
    body, so every allowance is the resting press; with one probe sunk 2 cm in the source's belly at frame 1, the
    same segments' allowance at that frame is that depth times the height ratio, and only there."""
    ch, f = body
    J = ch.skeleton.num_bones
    rot = np.zeros((2, J, 4))
    rot[..., 0] = 1.0
    track = ClipTrack(ch, Motion(rot, np.zeros((2, J, 3)), 30.0))
    pts = world_points(f, track)
    assert torch.allclose(pts[0], torch.as_tensor(rest_points(ch, f)), atol=1e-9)
    allow = source_allowance(f, ch, track, 1.0)
    assert allow.shape == (2, len(f.probe_bone), f.num_fields)
    assert torch.allclose(allow, torch.full_like(allow, ALLOW * f.height))

    class Sunk:                     # the same clip with one right-hand probe 2 cm inside the belly at frame 1
        num_frames, character = 2, ch
        arm_rotations, arm_positions = track.arm_rotations, track.arm_positions
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    v = belly_front(ch)
    q = f.probe_names.index("right_hand")
    import core.solver.surface as surface
    real = surface.world_points

    def sunk_points(fields, tr):
        out = real(fields, track).clone()
        out[1, 4 * fields.num_fields + q] = torch.as_tensor(V[v] - 0.02 * N[v])
        return out
    monkeypatch.setattr(surface, "world_points", sunk_points)
    allow = source_allowance(f, ch, Sunk(), 1.5)
    belly = int(np.argmax(allow[1, q].numpy()))
    assert allow[1, q, belly] == pytest.approx(1.5 * 0.02 + ALLOW * f.height, abs=0.006)
    rows = [i for i, n in enumerate(f.probe_names) if n == "right_hand"]
    assert torch.all(allow[1, rows, belly] == allow[1, q, belly])          # every probe of the right hand
    assert torch.allclose(allow[0], torch.full_like(allow[0], ALLOW * f.height))
    monkeypatch.setattr(surface, "SOURCE_ALLOWANCE", False)                # the experiment: the resting press alone
    off = source_allowance(f, ch, Sunk(), 1.5)
    assert torch.allclose(off, torch.full_like(off, ALLOW * f.height))


def assert_the_dense_sum(barrier, x, allow, abs_tol=None) -> tuple:
    """(value, gradient (T, 4F + Q, 3)) of the dense barrier at ``x`` (T, 4F + Q, 3), requiring grad: Σ over every
    (frame, probe) of the largest relu(depth − allow)² over the fields, × weight / (T·unit); asserts that
    ``barrier.weighted`` gives the same value and gradient."""
    sparse = barrier.weighted(x)
    (g_sparse,) = torch.autograd.grad(sparse, x) if sparse.requires_grad else (torch.zeros_like(x),)
    depth = surface_depths(barrier.fields, x, barrier.grid)
    dense = barrier.weight * torch.relu(depth - allow).square().amax(-1).sum() / (x.shape[0] * barrier.unit)
    (g_dense,) = torch.autograd.grad(dense, x)
    assert float(sparse.detach()) == pytest.approx(float(dense.detach()), rel=1e-12, abs=abs_tol)
    assert torch.allclose(g_sparse, g_dense, rtol=1e-9, atol=1e-12)
    return float(dense.detach()), g_dense


def test_the_sparse_barrier_is_the_dense_sum_in_value_and_gradient(body):
    """SurfaceBarrier reads again, with gradients, only the entries deeper than their allowance: on frames with
    probes sunk into the belly, the chest and the other hand at several depths (and others resting or outside),
    its value and its gradient are the dense Σ over every (frame, probe) of the largest relu(depth − allow)² over
    the fields."""
    ch, f = body
    F, Q = f.num_fields, len(f.probe_bone)
    rest = torch.as_tensor(rest_points(ch, f), dtype=torch.float64)
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    front = torso_front(ch)
    g = np.random.default_rng(3)
    frames = []
    for t in range(5):
        pts = rest.clone()
        for k, q in enumerate(g.choice(Q, size=8, replace=False)):
            v = front[g.integers(len(front))]
            pts[4 * F + q] = torch.as_tensor(V[v] - (0.004 * k - 0.004) * N[v])       # −4 mm (outside) to 24 mm
        frames.append(pts)
    pts = torch.stack(frames).requires_grad_(True)                                     # (5, 4F + Q, 3)
    allow = torch.full((5, Q, F), ALLOW * f.height, dtype=torch.float64)
    allow[2] *= 3.0                                                                    # a frame of a deeper source
    barrier = SurfaceBarrier(f, 1.7, allow, dtype=torch.float64)
    dense, g_dense = assert_the_dense_sum(barrier, pts, allow)
    assert dense > 0
    assert float(g_dense.abs().max()) > 0


def test_near_entries_are_exactly_the_probes_in_a_field_box(body):
    """near_entries culls by spheres, then keeps what is in a box: on frames with the hands and forearms swung and
    moved all around the body (in front of the belly, against the other hand, far to the side), it gives exactly
    the tested (frame, probe, field) entries whose probe is in the field's box, located densely."""
    assert_near_entries_exact(*body)


def assert_near_entries_exact(ch, f):
    """``near_entries`` on random placements of each block of probes equals the dense location."""
    from core.solver import surface
    F, Q, n = f.num_fields, len(f.probe_bone), f.per_segment
    rest = torch.as_tensor(rest_points(ch, f), dtype=torch.float64)
    g = np.random.default_rng(11)
    frames = []
    for t in range(6):
        pts = rest.clone()
        for s in range(Q // n):                          # each block of probes moved rigidly to a random place
            rows = slice(4 * F + s * n, 4 * F + (s + 1) * n)
            c = pts[rows].mean(0)
            turn = g.normal(size=4)
            R = torch.as_tensor(quat_to_matrix(turn / np.linalg.norm(turn)))
            target = torch.as_tensor(g.uniform([-0.4, -0.4, 0.3 * ch.height], [0.4, 0.4, 0.9 * ch.height]))
            pts[rows] = (pts[rows] - c) @ R.T + target
        frames.append(pts)
    pts = torch.stack(frames)
    M, c = surface.box_maps(f, pts)
    u = torch.einsum("tfab,tqb->tqfa", M, pts[:, 4 * F:]) + c[:, None]                              # (T, Q, F, 3)
    dense = (u.abs() <= 1.0).all(-1) & torch.as_tensor(f.tested)
    t, q, fi, _ = surface.near_entries(f, pts)
    got = torch.zeros_like(dense)
    got[t, q, fi] = True
    assert len(t) == int(got.sum())                                                   # no entry twice
    assert int(dense.sum()) > 20 and int((~dense & torch.as_tensor(f.tested)).sum()) > 20   # both kinds present
    assert torch.equal(got, dense)


def test_the_barrier_s_candidates_follow_the_probes_between_searches(body):
    """Over 30 evaluations where the hands and forearms drift (about 2 mm a step, now and then a jump of
    centimetres) in and out of the belly and chest, each evaluation's value and gradient are the dense sum's, while
    the barrier searched far fewer frames than it evaluated (its candidates are kept between searches)."""
    ch, f = body
    F, Q = f.num_fields, len(f.probe_bone)
    rest = torch.as_tensor(rest_points(ch, f), dtype=torch.float64)
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    front = torso_front(ch)
    g = np.random.default_rng(5)
    T = 8
    pts = rest.repeat(T, 1, 1)
    probes = g.choice(Q, size=10, replace=False)
    for t in range(T):                                   # 10 probes placed at the skin, 1 cm out to 1 cm in
        for q in probes:
            v = front[g.integers(len(front))]
            pts[t, 4 * F + q] = torch.as_tensor(V[v] + g.uniform(-0.01, 0.01) * N[v])
    allow = torch.full((T, Q, F), ALLOW * f.height, dtype=torch.float64)
    barrier = SurfaceBarrier(f, 1.0, allow, dtype=torch.float64)
    values = []
    for step in range(30):
        step_size = 0.03 if step % 10 == 9 else 0.001
        pts[:, 4 * F + probes] += torch.as_tensor(g.normal(scale=step_size, size=(T, len(probes), 3)))
        dense, _ = assert_the_dense_sum(barrier, pts.clone().requires_grad_(True), allow, abs_tol=1e-15)
        values.append(dense)
    assert sum(v > 0 for v in values) > 10
    assert barrier.searched < 0.5 * 30 * T


def seam_points(ch, pairs, depth: float = 0.02, per_pair: int = 6) -> list:
    """[(point (3,), exact depth)]: points ``depth`` under the skin where two segments meet (the vertices of one
    within 1 cm of the other's), and their depth as the metrics define it (under the nearest vertex's tangent
    plane, over the whole body)."""
    from scipy.spatial import cKDTree
    from core.rig.parts import vertex_segments
    V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
    seg, names, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    body = np.nonzero(seg >= 0)[0]
    tree = cKDTree(V[body])
    out = []
    for a, b in pairs:
        A, B = np.nonzero(seg == names.index(a))[0], np.nonzero(seg == names.index(b))[0]
        near = A[cKDTree(V[B]).query(V[A])[0] < 0.01]
        for v in near[np.linspace(0, len(near) - 1, per_pair).astype(int)]:
            p = V[v] - depth * N[v]
            k = body[tree.query(p)[1]]
            out.append((p, float(-((p - V[k]) @ N[k]))))
    return out


def test_shared_interior_reads_a_probe_in_the_crease_between_trunk_segments(monkeypatch):
    """Where the hips meet a thigh and the spine meets the chest, a hand probe 2 cm under the skin: with each field
    keeping its own segment's part of the interior (and no seam vertices shared, ``SEAM_WEIGHT`` 0), the read at the
    spine-chest seam blends depth with "far" (median under half the exact depth); with the trunk and thighs sharing
    the interior (``SHARED_INTERIOR``), it reads its depth (median within 20 %), also when a field shares only a band
    about its own surface (``SHARED_BAND``)."""
    from core.solver import surface_fields as sf
    monkeypatch.setattr(sf, "SEAM_WEIGHT", 0.0)

    def median_ratio(shared, band: float = 0.0) -> float:
        monkeypatch.setattr(sf, "SHARED_INTERIOR", shared)
        monkeypatch.setattr(sf, "SHARED_BAND", band)
        skel, mesh, bone_map = make_body(BodyParams(name="surface_test", belly=1.2), pose="T")
        ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
        f = surface_fields(ch)
        pts = rest_points(ch, f)
        q = 4 * f.num_fields + f.probe_names.index("right_hand")
        ratios = []
        for p, exact in seam_points(ch, (("hips", "left_upper_leg"), ("spine", "chest"))):
            moved = pts.copy()
            moved[q] = p
            read = float(surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * f.num_fields].max())
            assert exact > 0.005
            ratios.append(read / exact)
        assert len(ratios) == 12
        return float(np.median(ratios))

    assert sf.SHARED_INTERIOR == ()
    assert median_ratio(()) < 0.5
    assert median_ratio(("hips", "spine", "chest", "upper_chest", "upper_leg")) > 0.8
    assert median_ratio(("hips", "spine", "chest", "upper_chest", "upper_leg"), band=0.01) > 0.8


def test_a_shared_band_keeps_a_field_from_carrying_its_neighbour_s_interior(monkeypatch):
    """With the trunk sharing the interior, the chest's field also reads a point 2 cm inside the belly, 6 cm and more
    from the chest (where the spine's bone, not the chest's, carries it when the trunk bends); sharing only a band of
    1 % of the height about the chest's own surface (``SHARED_BAND``) leaves it "far" there."""
    from scipy.spatial import cKDTree
    from core.rig.parts import vertex_segments
    from core.solver import surface_fields as sf
    monkeypatch.setattr(sf, "SHARED_INTERIOR", ("spine", "chest", "upper_chest"))
    reads = []
    for band in (0.0, 0.01):
        monkeypatch.setattr(sf, "SHARED_BAND", band)
        skel, mesh, bone_map = make_body(BodyParams(name="surface_test", belly=1.2), pose="T")
        ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
        f = surface_fields(ch)
        seg, names, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
        V, N = ch.mesh.rest_verts, ch.mesh.rest_normals
        spine = np.nonzero(seg == names.index("spine"))[0]
        far = spine[cKDTree(V[seg == names.index("chest")]).query(V[spine])[0] > 0.06]
        assert len(far) > 10
        pts = rest_points(ch, f)
        q = 4 * f.num_fields + f.probe_names.index("right_hand")
        chest = f.field_names.index("chest")
        inside = []
        for v in far[np.linspace(0, len(far) - 1, 8).astype(int)]:
            moved = pts.copy()
            moved[q] = V[v] - 0.02 * N[v]
            box = surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * f.num_fields, chest]
            inside.append(float(box))
        reads.append(inside)
    assert sum(abs(r - 0.02) < 0.003 for r in reads[0]) >= 2      # those in the chest field's box: 2 cm deep
    assert max(reads[1]) == 0.0


def test_a_field_reads_its_depth_beside_where_a_probing_arm_rests(monkeypatch):
    """A body whose arms rest against its chest (A pose, a big chest and thick arms): a hand probe 3 cm inside the
    side of the chest, where the rest arm lies against it. Built from every segment's rest vertices, the chest's field
    finds the arm's rest surface nearest and reads "far" there (median 0 of the exact depth); built without the limbs
    that probe it (``WITHOUT_PROBING_LIMBS``, where an arm rests says nothing of where it is animated), it reads the
    depth (median within 10 %)."""
    from scipy.spatial import cKDTree
    from core.rig.parts import vertex_segments
    from core.solver import surface_fields as sf

    skel, mesh, bone_map = make_body(BodyParams(name="surface_test", chest=1.6, torso_width=1.5, limb_thickness=1.5),
                                     pose="A")
    ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
    V, N = mesh.rest_verts, mesh.rest_normals
    seg, names, _ = vertex_segments(skel, mesh, bone_map)
    chest = np.nonzero(seg == names.index("chest"))[0]
    arm = np.isin(seg, [names.index(n) for n in ("left_upper_arm", "left_lower_arm", "left_hand")])
    side = chest[(N[chest, 0] > 0.6) & (cKDTree(V[arm]).query(V[chest])[0] < 0.02)]
    assert len(side) >= 12                                            # the rest arm lies against the chest
    armless = np.nonzero((seg >= 0) & ~np.isin(seg, [k for k, n in enumerate(names) if "arm" in n or "hand" in n]))[0]
    tree = cKDTree(V[armless])

    def median_ratio(flag) -> float:
        monkeypatch.setattr(sf, "WITHOUT_PROBING_LIMBS", flag)
        f = sf._surface_fields(ch)
        pts = rest_points(ch, f)
        q = 4 * f.num_fields + f.probe_names.index("right_hand")
        ratios = []
        for v in side[np.linspace(0, len(side) - 1, 12).astype(int)]:
            p = V[v] - 0.03 * N[v]
            k = armless[tree.query(p)[1]]
            moved = pts.copy()
            moved[q] = p
            read = float(surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * f.num_fields].max())
            ratios.append(read / float(-((p - V[k]) @ N[k])))
        return float(np.median(ratios))

    assert sf.WITHOUT_PROBING_LIMBS is False
    assert median_ratio(False) < 0.3
    assert median_ratio(True) > 0.9


def test_a_solve_whose_surface_points_are_odd_in_number_keeps_the_capsules_apart(monkeypatch):
    """The surface barrier's points follow the capsule ends in ``body_positions``; the capsule barrier reads only
    the ends (``capsules.capsule_ends``), so an odd number of surface points (blocks of 13 probes) solves."""
    from core.pipeline.copy_rotations import copy_rotations
    from core.solver import SolveJob, SolverSettings
    from core.solver import surface_fields as sf
    from core.solver.capsules import capsule_ends
    from tests.core.synth import make_humanoid, walk_motion

    monkeypatch.setattr(sf, "PROBES", 13)
    src, tgt = make_humanoid(), make_humanoid(scale=0.8, girth=2.2, name="fat_odd")
    motion = walk_motion(src, frames=12, clap=True)
    job = SolveJob(src, motion, tgt, copy_rotations(src, motion, tgt), SolverSettings(iterations=3, num_threads=1))
    job.run()
    assert job.surface is not None and job.own_barrier is not None
    assert (job.body_positions.shape[1] - job.surface.rows.start) % 2 == 1
    assert 2 * capsule_ends(job).shape[1] == job.surface.rows.start
    assert np.isfinite(job.result().rotations).all()


def test_a_solve_with_the_contact_state_s_surface_gate_records_the_clapping_hands(monkeypatch):
    """With ``objective.CONTACT_HELD_ON_SURFACE`` the job gives its objective a SurfaceGate over its surface barrier,
    which then records touching probes at every step: a clap onto a fat body has its hands touching; without it,
    no gate and nothing recorded."""
    from core.pipeline.copy_rotations import copy_rotations
    from core.solver import SolveJob, SolverSettings
    from core.solver import objective
    from tests.core.synth import make_humanoid, walk_motion

    src, tgt = make_humanoid(), make_humanoid(scale=0.8, girth=2.2, name="fat_gate")
    motion = walk_motion(src, frames=12, clap=True)
    init = copy_rotations(src, motion, tgt)
    for on in (False, True):
        monkeypatch.setattr(objective, "CONTACT_HELD_ON_SURFACE", on)
        job = SolveJob(src, motion, tgt, init, SolverSettings(iterations=3, num_threads=1))
        job.run()
        assert (job.objective.surface_gate is not None) == on
        assert (job.surface.touching is not None) == on
        assert np.isfinite(job.result().rotations).all()
    f = job.surface.fields
    _, q, fi = job.surface.touching
    touched = {(f.probe_names[a], f.field_names[b]) for a, b in zip(q.tolist(), fi.tolist())}
    assert touched & {("left_hand", "right_hand"), ("right_hand", "left_hand")}
    assert (job.objective.surface_gate.probe_keys >= 0).any()


@pytest.mark.parametrize("bend_deg", [30.0, -30.0])
def test_seam_weights_read_a_probe_where_the_chest_meets_a_bent_upper_chest(monkeypatch, bend_deg):
    """Around the ring where the chest meets the upper chest, 12 points 2 cm under the skin of a trunk whose upper
    chest is bent 30° forward or back: the two fields read the seam in bone frames that disagree, and where the
    surface opens each field's nearest rest vertex is its neighbour's, so with each field keeping its own segment's
    part of the interior (the default) at least 3 points read under half their depth (the posed mesh's, under the
    nearest vertex's tangent plane). With the vertices that both bones move belonging to both fields
    (``SEAM_SEGMENTS``, ``SEAM_WEIGHT`` 0.3, the default), at most 2 do."""
    from scipy.spatial import cKDTree
    from core.rig.parts import vertex_segments
    from core.solver import surface_fields as sf

    def ratios(seam: tuple, weight: float) -> np.ndarray:
        monkeypatch.setattr(sf, "SEAM_SEGMENTS", seam)
        monkeypatch.setattr(sf, "SEAM_WEIGHT", weight)
        skel, mesh, bone_map = make_body(BodyParams(name="surface_test", belly=1.2), pose="T")
        ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
        f = surface_fields(ch)
        motion = Motion.rest(1, skel.num_bones)
        half = np.radians(bend_deg) / 2
        motion.rotations[0, skel.index(bone_map["upper_chest"])] = (np.cos(half), np.sin(half), 0.0, 0.0)
        track = ClipTrack(ch, motion)
        pts = world_points(f, track)[0].numpy()
        seg, names, _ = vertex_segments(skel, mesh, bone_map)
        body = np.nonzero(seg >= 0)[0]
        V, N = (a[0] for a in track.vertices(body, normals=True))
        R = mesh.rest_verts[body]
        A, B = (np.nonzero(seg[body] == names.index(n))[0] for n in ("chest", "upper_chest"))
        ring = A[cKDTree(R[B]).query(R[A])[0] < 0.025]                     # the seam's ring, at rest
        tree = cKDTree(V)
        q = 4 * f.num_fields + f.probe_names.index("right_hand")
        out = []
        for v in ring[sf.farthest_points(R[ring], 12)]:
            p = V[v] - 0.02 * N[v]
            k = tree.query(p)[1]
            exact = float(-((p - V[k]) @ N[k]))
            moved = pts.copy()
            moved[q] = p
            read = float(surface_depths(f, torch.as_tensor(moved)[None])[0, q - 4 * f.num_fields].max())
            assert exact > 0.005
            out.append(read / exact)
        return np.array(out)

    assert sf.SEAM_SEGMENTS == ("spine", "chest", "upper_chest") and sf.SEAM_WEIGHT == 0.3      # the default
    assert (ratios((), 0.0) < 0.5).sum() >= 3
    assert (ratios(("spine", "chest", "upper_chest"), 0.3) < 0.5).sum() <= 2


def test_fields_are_built_again_when_the_module_s_constants_change(body, monkeypatch):
    """The fields are kept per character and per setting of ``surface_fields``' constants: an experiment that changes
    one between two solves of the same character gets fields built with it, and the same setting gets the same
    object back."""
    from core.solver import surface_fields as sf
    ch, fields = body
    assert surface_fields(ch) is fields
    monkeypatch.setattr(sf, "PROBES", 16)
    fewer = surface_fields(ch)
    assert fewer.per_segment == 16 and fields.per_segment > 16
    assert surface_fields(ch) is fewer


def test_a_hand_carries_more_probe_blocks_each_a_part_of_it(monkeypatch):
    """``PROBE_BLOCKS`` {"hand": 2} (the default): each hand carries two blocks of ``per_segment`` probes,
    farthest-point samples of its vertices split along its length (each block's sphere smaller than the hand's), read
    against the same fields as one block would be; ``near_entries`` stays exact."""
    from core.solver import surface_fields as sf
    monkeypatch.setattr(sf, "PROBE_BLOCKS", {"hand": 2})
    skel, mesh, bone_map = make_body(BodyParams(name="surface_test", belly=1.2), pose="T")
    ch = Character(skel, mesh, bone_map, height=float(np.ptp(mesh.rest_verts[:, 2])))
    f = surface_fields(ch)
    n = f.per_segment
    names = np.array(f.probe_names)
    assert (names == "left_hand").sum() == 2 * n and (names == "left_lower_arm").sum() == n
    rows = np.nonzero(names == "right_hand")[0]
    assert (f.tested[rows] == f.tested[rows[0]]).all()
    P = f.probe_local[rows]
    whole = np.linalg.norm(P - P.mean(0), axis=1).max()
    for block in (P[:n], P[n:]):
        assert np.linalg.norm(block - block.mean(0), axis=1).max() < 0.9 * whole
    assert len(np.unique(np.round(P, 6), axis=0)) == 2 * n            # distinct points
    assert_near_entries_exact(ch, f)
