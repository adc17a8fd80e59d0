"""The metrics' fast surface passes equal slow reference implementations, kept here as the dense passes they
replaced: every sampled vertex against every capsule on every frame, skinned with the dense (V, J) weight
matrix (``core.metrics.measures``' floor and self-penetration shares, ``core.metrics.partners``' penetration
between characters), on synthetic bodies whose arms cross their bodies, a sunk and raised floor, and a couple
holding hands. The references run in float64, the passes in float32: equal within float32 rounding."""

import numpy as np
import pytest
import torch

from core.character.track import ClipTrack
from core.contacts.terrain import ground_height
from core.metrics import broadphase, measures, partners
from core.metrics.measures import (FLOOR_TOLERANCE, SELF_PEN_MAX_VERTICES, _capsules, measure, vertex_areas,
                                   point_segment_distance)
from core.progress import drive
from core.rig.parts import vertex_segments
from core.rig.skinning import bind_matrices
from core.types import Motion
from tests.core.synth import couple, make_humanoid, walk_motion


def reference_surface_shares(track: ClipTrack, ground) -> tuple:
    """(floor share (T,), self share (T,)): the dense pass, float64, every sampled vertex against every capsule."""
    ch = track.character
    sk, mesh = ch.skeleton, ch.mesh
    seg, bones, bone_ids = vertex_segments(sk, mesh, ch.bone_map)
    caps = _capsules(ch, seg, bones, bone_ids)
    area = torch.as_tensor(vertex_areas(mesh))
    V = mesh.num_verts
    sample = np.arange(0, V, max(1, int(np.ceil(V / SELF_PEN_MAX_VERTICES))))
    sample = sample[seg[sample] >= 0]
    s_area = area[sample] / area[sample].sum()
    test = ~torch.as_tensor(caps.excluded[seg[sample]]) & torch.as_tensor(caps.radius > 0)[None]   # (S, C)
    lo, hi, r = (torch.as_tensor(x) for x in (caps.a[:, 1], caps.b[:, 1], caps.radius))

    def inside(p, P, U):                     # (B, S, 3), (B, C, 3) -> (B, S, C), the plain distance to each axis
        a, b = P + lo[:, None] * U, P + hi[:, None] * U
        return point_segment_distance(p[:, :, None], a[:, None], b[:, None]) < r

    G = torch.as_tensor(bind_matrices(sk, mesh))[caps.bone]
    test &= ~inside(torch.as_tensor(mesh.rest_verts[sample])[None], G[None, :, :3, 3], G[None, :, :3, 1])[0]
    W = torch.as_tensor(mesh.dense_weights(sk.num_bones))
    rest = torch.cat([torch.as_tensor(mesh.rest_verts), torch.ones((V, 1), dtype=torch.float64)], 1)
    M = torch.as_tensor(sk.object_matrix)
    S_rot, S_t = track._skin
    S = torch.cat([S_rot, S_t[..., None]], -1)                                           # (T, J, 3, 4)
    arm = (torch.einsum("vj,tjab->tvab", W, S) * rest[:, None]).sum(-1)                # (T, V, 3)
    world = arm @ M[:3, :3].T + M[:3, 3]
    hgt = world[..., 2] - ground_height(ground, world[..., 0], world[..., 1], slice(0, track.num_frames))
    floor = ((hgt < -FLOOR_TOLERANCE).double() * area).sum(-1)
    hit = inside(arm[:, sample], track.arm_positions[:, caps.bone], track.arm_rotations[:, caps.bone][..., 1])
    self_share = ((hit & test[None]).any(-1).double() * s_area).sum(-1)
    return floor.numpy(), self_share.numpy()


def reference_partner_inside(tracks: list) -> tuple:
    """((T, K) area share of each character's sampled surface inside another's capsules: dense, float64; the
    smallest |distance − radius| of any vertex to any capsule, metres: a vertex on a capsule's surface is in or
    out by rounding alone)."""
    out, margin = [], float("inf")
    for a, ta in enumerate(tracks):
        ch = ta.character
        V = ch.mesh.num_verts
        sample = np.arange(0, V, max(1, int(np.ceil(V / partners.PARTNER_PEN_MAX_VERTICES))))
        area = torch.as_tensor(vertex_areas(ch.mesh)[sample])
        verts = torch.as_tensor(ta.vertices(sample))                                     # (T, S, 3) world
        hit = torch.zeros(verts.shape[:2], dtype=torch.bool)
        for b, tb in enumerate(tracks):
            if b != a:
                caps = partners.body_capsules(tb.character)
                ends = partners.capsule_paths(tb, caps)                                   # (T, C, 2, 3)
                d = point_segment_distance(verts[:, :, None], ends[:, None, :, 0], ends[:, None, :, 1])
                hit |= (d < torch.as_tensor(caps.radius)).any(-1)
                margin = min(margin, float((d - torch.as_tensor(caps.radius)).abs().min()))
        out.append((hit.double() * area / area.sum()).sum(-1).clamp(max=1.0).numpy())
    return np.stack(out, 1), margin


@pytest.fixture(scope="module")
def clapping():
    """A wide body walking and clapping (its hands meet in front of its belly: self-penetration on many frames),
    and the same walk on a thinner body."""
    out = []
    for girth in (2.5, 1.0):
        ch = make_humanoid(girth=girth)
        out.append((ch, walk_motion(ch, frames=48, clap=True)))
    return out


@pytest.mark.parametrize("ground", [0.0, 0.01, "levels"])
def test_surface_shares_equal_the_dense_reference(clapping, ground):
    for ch, motion in clapping:
        track = ClipTrack(ch, motion)
        g = np.linspace(-0.01, 0.02, motion.num_frames) if ground == "levels" else ground
        floor, self_share = drive(measures._surface_shares(track, g))
        ref_floor, ref_self = reference_surface_shares(track, g)
        np.testing.assert_allclose(floor, ref_floor, atol=1e-6)
        np.testing.assert_allclose(self_share, ref_self, atol=1e-6)
        assert ref_floor.max() > 0 or ground == 0.0
        if ch is clapping[0][0]:
            assert (ref_self > 0).sum() >= 10          # the case has something to find
        m = measure(ClipTrack(ch, motion), g)        # the public measure reads the same pass
        np.testing.assert_allclose(m.self_share, ref_self, atol=1e-6)


def test_skinning_matrix_is_linear_blend_skinning(clapping):
    ch, motion = clapping[0]
    track = ClipTrack(ch, motion)
    ids = np.arange(0, ch.mesh.num_verts, 7)
    A = broadphase.skinning_matrix(ch.mesh.rest_verts[ids], ch.mesh.weight_bones[ids], ch.mesh.weight_values[ids],
                                   ch.skeleton.num_bones)
    S_rot, S_t = track._skin
    got = broadphase.skin_rows(A, torch.cat([S_rot, S_t[..., None]], -1).float())      # (T, N, 3) armature
    M = ch.skeleton.object_matrix
    want = (track.vertices(ids) - M[:3, 3]) @ np.linalg.inv(M[:3, :3]).T
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


def test_candidates_cover_every_entry_inside():
    """The broad phase keeps every (frame, point, capsule) entry whose point lies inside the capsule, and fewer
    entries than the dense test, over random groups of points and capsules; in blocks smaller than one pair too."""
    g = torch.Generator().manual_seed(1)
    B, N, C, G = 4, 300, 6, 5
    groups = broadphase.Groups(torch.randint(0, G, (N,), generator=g).numpy(), G)
    centre = torch.rand(B, G, 3, generator=g) * 2
    x = centre[:, groups.group] + 0.2 * torch.randn(B, N, 3, generator=g)              # clustered per group
    a, b = torch.rand(B, C, 3, generator=g) * 2, torch.rand(B, C, 3, generator=g) * 2
    r = 0.05 + 0.2 * torch.rand(C, generator=g)
    allowed = torch.rand(G, C, generator=g) > 0.2
    inside = (point_segment_distance(x[:, :, None], a[:, None], b[:, None]) < r) & allowed[groups.group][None]
    for block in (1 << 20, 7):
        old, broadphase.ENTRY_BLOCK = broadphase.ENTRY_BLOCK, block
        try:
            found = torch.zeros(B, N, C, dtype=torch.bool)
            count = 0
            for f, i, c in broadphase.candidates(broadphase.group_boxes(x, groups), broadphase.capsule_boxes(a, b, r),
                                                 allowed, groups):
                found[f, i, c] = True
                count += len(f)
        finally:
            broadphase.ENTRY_BLOCK = old
        assert bool(found[inside].all()) and int(inside.sum()) > 0
        assert count == int(found.sum()) < B * N * C       # each entry once, and fewer than the dense test reads


def test_partner_penetration_equals_the_dense_reference():
    a, ma, b, mb = couple(frames=30)
    # B moved 12 cm along its hips' rest axis (and 3 mm up, so that no vertex of these symmetric bodies lies on a
    # capsule's surface): hands and arms cross
    near = Motion(mb.rotations, mb.locations.copy(), mb.fps)
    hips = b.skeleton.index(b.bone_map["hips"])
    near.locations[:, hips] += np.array([0.0, -0.1237, 0.0031]) @ b.skeleton.rest_local[hips, :3, :3]
    tracks = [ClipTrack(a, ma), ClipTrack(b, near)]
    got = drive(partners._surface_inside(tracks))
    want, margin = reference_partner_inside(tracks)
    assert want.max() > 0.001 and (want > 0).sum() >= 10 and margin > 1e-5
    np.testing.assert_allclose(got, want, atol=1e-6)
    # the batched evaluation measures the sources once and gives each set of targets what evaluate_partners gives
    sets = drive(partners.evaluating_partners(tracks, [[(a, ma), (b, mb)], [(a, ma), (b, near)]]))
    for out, targets in zip(sets, ([(a, ma), (b, mb)], [(a, ma), (b, near)])):
        alone = partners.evaluate_partners([ClipTrack(a, ma), ClipTrack(b, near)], targets)
        assert list(out) == list(alone)
        np.testing.assert_allclose([out[k] for k in out], [alone[k] for k in alone], rtol=1e-6, atol=1e-9)
    first, _ = reference_partner_inside([ClipTrack(a, ma), ClipTrack(b, mb)])
    assert abs(float(first.mean()) - float(want.mean())) > 1e-4          # the two sets differ
    assert sets[0]["partner_pen_mean"] == pytest.approx(float(first.mean()), abs=1e-6)
    assert sets[1]["partner_pen_mean"] == pytest.approx(float(want.mean()), abs=1e-6)
