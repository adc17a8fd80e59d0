import math

import pytest
import torch

from core.solver.losses import (capped_gain, contact_state_loss, cosine, dir_loss, dist_loss, floor_barrier,
                         height_loss, jerk, jerk_excess_loss, jerk_totals, pen_loss, reg_loss, sliding_loss,
                         smooth_loss)


def test_reg_loss_is_sum_of_squared_offsets():
    p0 = torch.zeros(2, 2, 3)
    p = p0.clone()
    p[0, 1] = torch.tensor([1.0, 2.0, 2.0])   # |.|² = 9
    p[1, 0] = torch.tensor([0.0, 0.0, 0.5])   # 0.25
    assert float(reg_loss(p, p0)) == pytest.approx(9.25)
    assert float(reg_loss(p, p0, torch.tensor([2.0, 0.0]))) == pytest.approx(0.5)  # per-vertex scale


def test_jerk_stencil_and_smooth_loss():
    fps = 10.0
    t = torch.arange(6, dtype=torch.float64) / fps
    p = torch.stack([t ** 3, torch.zeros_like(t), torch.zeros_like(t)], -1)[:, None]  # x = t³: jerk = 6
    j = jerk(p, fps)
    assert j.shape == (3, 1, 3)
    assert torch.allclose(j[..., 0], torch.full((3, 1), 6.0, dtype=torch.float64))
    # non-squared norm: 3 frames × 6 m/s³ (eps negligible)
    assert float(smooth_loss(p, fps, eps=1e-9)) == pytest.approx(18.0)
    lin = torch.stack([t, 2 * t, -t], -1)[:, None]
    assert float(smooth_loss(lin, fps, eps=1e-9)) == pytest.approx(0.0, abs=1e-6)
    assert float(smooth_loss(p[:3], fps)) == 0.0


def test_jerk_totals_and_excess_by_hand():
    """Windows of 2 jerk frames: a point kicked 1 cm at frame 4 has third differences 1, −3, 3, −1 cm at jerk
    frames 1–4 (× fps³); its totals are (1, 6, 1) cm·fps³ in windows (0–1, 2–3, 4: the last one short)."""
    fps = 10.0
    p = torch.zeros(8, 2, 3, dtype=torch.float64)
    p[4, 0, 2] = 0.01
    tot = jerk_totals(p, fps, 2, eps=1e-12)
    assert tot.shape == (3, 2)
    assert torch.allclose(tot[:, 0], torch.tensor([1.0, 6.0, 1.0], dtype=torch.float64) * 0.01 * fps ** 3)
    assert float(tot[:, 1].abs().max()) < 1e-9
    # against a budget of its own totals the point pays nothing; a second kick, −0.5 cm at frame 3, makes them
    # (3, 8, 1) cm·fps³: it pays exactly the 2 + 2 it adds
    assert float(jerk_excess_loss(p, fps, tot, 2, eps=1e-12)) == pytest.approx(0.0, abs=1e-9)
    q = p.clone()
    q[3, 0, 2] = -0.005
    extra = jerk_totals(q, fps, 2, eps=1e-12) - tot
    assert float(jerk_excess_loss(q, fps, tot, 2, eps=1e-12)) == pytest.approx(float(extra.clamp_min(0).sum()))
    assert float(extra.clamp_min(0).sum()) == pytest.approx(0.04 * fps ** 3)
    # a point that spends less than its budget in a window earns nothing there (no push under copy-rotations')
    assert float(jerk_excess_loss(p * 0.5, fps, tot, 2, eps=1e-12)) == pytest.approx(0.0, abs=1e-9)
    # per-point scale, and clips shorter than 4 frames give 0
    assert float(jerk_excess_loss(q, fps, tot, 2, torch.tensor([2.0, 1.0], dtype=torch.float64), eps=1e-12)) == \
        pytest.approx(2.0 * float(extra.clamp_min(0).sum()))
    assert float(jerk_excess_loss(p[:3], fps, tot, 2)) == 0.0
    # with a knee of half the budget the hinge rounds off: budgets (10, 60, 10), excesses (20, 20, 0) m/s³ summed;
    # the first is beyond its knee of 5 and pays 20 − 2.5, the second within its knee of 30 and pays 20² / 60
    assert torch.allclose(extra[:, 0], torch.tensor([20.0, 20.0, 0.0], dtype=torch.float64))
    assert float(jerk_excess_loss(q, fps, tot, 2, eps=1e-12, knee=0.5)) == pytest.approx(17.5 + 400.0 / 60.0)
    # the windows a source caps below copy-rotations' budget weigh the gain, a budget equal to it (or under it by
    # round-off) 1; as the per-window scale, the capped window's excess counts × the gain
    capped = tot.clone()
    capped[1, 0] *= 0.5
    capped[2, 0] *= 1.0 - 1e-5
    gain = capped_gain(capped, tot, 3.0)
    assert gain.dtype == tot.dtype and gain[:, 0].tolist() == [1.0, 3.0, 1.0] and gain[:, 1].tolist() == [1.0] * 3
    plain = jerk_excess_loss(q, fps, capped, 2, eps=1e-12)
    weighted = jerk_excess_loss(q, fps, capped, 2, gain, eps=1e-12)
    middle = float((jerk_totals(q, fps, 2, eps=1e-12)[1, 0] - capped[1, 0]).clamp_min(0))
    assert middle > 0 and float(weighted) == pytest.approx(float(plain) + 2.0 * middle)
    # its slope: a window of budget 10 with a knee of 5, spent e over, pays e / 5 under the knee and 1 beyond it,
    # continuous at the knee
    budget = torch.tensor([[10.0]], dtype=torch.float64)
    for e in (2.5, 5.0 - 1e-3, 5.0 + 1e-3, 7.5):
        x = torch.zeros(4, 1, 3, dtype=torch.float64)
        x[3, 0, 2] = (10.0 + e) / fps ** 3            # one third difference of 10 + e m/s³
        x.requires_grad_(True)
        jerk_excess_loss(x, fps, budget, 4, eps=1e-12, knee=0.5).backward()
        assert float(x.grad[3, 0, 2]) / fps ** 3 == pytest.approx(min(e / 5.0, 1.0), rel=1e-3)


def test_dist_pen_dir_losses_by_hand():
    w = torch.tensor([1.0, 0.5, 0.0])
    src = torch.tensor([0.1, 0.2, 0.3])
    tgt = torch.tensor([0.3, 0.0, 5.0])
    assert float(dist_loss(tgt, src, w)) == pytest.approx(0.04 + 0.01)
    assert float(pen_loss(tgt, src, w)) == pytest.approx(0.05)
    # surface: where the source is behind the surface (< 0), only the target's being behind it costs
    src_s = torch.tensor([-0.02, -0.02, 0.01])
    tgt_s = torch.tensor([0.005, -0.01, 0.0])
    assert float(pen_loss(tgt_s, src_s, torch.ones(3))) == pytest.approx(0.025 ** 2 + 0.01 ** 2 + 0.01 ** 2)
    assert float(pen_loss(tgt_s, src_s, torch.ones(3), surface=True)) == pytest.approx(0.0 + 0.01 ** 2 + 0.01 ** 2)
    a = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, 0]])
    b = torch.tensor([[2.0, 0, 0], [1.0, 0, 0], [-1.0, 0, 0]])
    assert cosine(a, b).tolist() == pytest.approx([1.0, 0.0, -1.0])
    # (1 - cos): 0, 1, 2 weighted by 1, 0.5, 0 -> 0 + 0.25 + 0
    assert float(dir_loss(b, a, w)) == pytest.approx(0.25)
    assert float(dir_loss(a, a, torch.ones(3))) == pytest.approx(0.0, abs=1e-12)  # aligned -> minimum


def test_height_loss_barrier_and_match():
    tgt = torch.tensor([[-0.1, 0.2], [0.05, 0.0]])
    src = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    w = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert float(floor_barrier(tgt)) == pytest.approx(0.01)
    assert float(height_loss(tgt, src, w)) == pytest.approx(0.01 + 0.01 + 0.0025)


def test_sliding_loss_broadcasts_floor_weight():
    v_t = torch.tensor([[[1.0, 1.0]], [[0.0, 2.0]]])
    v_s = torch.zeros(2, 1, 2)
    w = torch.tensor([[1.0], [0.5]])
    assert float(sliding_loss(v_t, v_s, w)) == pytest.approx(2.0 + 1.0)


def test_gradients_are_finite_at_degenerate_points():
    p = torch.zeros(5, 2, 3, requires_grad=True)             # zero jerk, coincident points
    loss = smooth_loss(p, 30.0) + reg_loss(p, torch.zeros(5, 2, 3))
    d = torch.zeros(3, 3, requires_grad=True)
    loss = loss + dir_loss(d, torch.ones(3, 3), torch.ones(3))
    loss.backward()
    assert torch.isfinite(p.grad).all() and torch.isfinite(d.grad).all()
    h = torch.tensor([[-0.2, 0.3]], requires_grad=True)
    height_loss(h, torch.zeros(1, 2), torch.ones(1, 2)).backward()
    assert h.grad[0, 0] < 0 and math.isfinite(float(h.grad[0, 1]))


def test_time_mean_by_hand():
    """The centred moving mean over 2r + 1 frames, fewer at the ends; radius 0 returns the input."""
    from core.descriptors.weights import time_mean
    w = torch.tensor([[0.0, 1.0], [3.0, 1.0], [6.0, 1.0], [0.0, 4.0]])
    m = time_mean(w, 1)
    assert torch.allclose(m[:, 0], torch.tensor([1.5, 3.0, 3.0, 3.0]))
    assert torch.allclose(m[:, 1], torch.tensor([1.0, 1.0, 2.0, 2.5]))
    assert time_mean(w, 0) is w


def test_contact_state_loss_keeps_the_sources_side_of_d_min_by_hand():
    # d_min 0.1 in the source, 0.2 in the target, margin 10 %: entries (source, target) distances
    src = torch.tensor([0.05, 0.05, 0.15, 0.15, 0.15, 0.103, 0.103])
    tgt = torch.tensor([0.17, 0.25, 0.25, 0.21, 0.15, 0.207, 0.205])
    dmin_s, dmin_t = torch.full((7,), 0.1), torch.full((7,), 0.2)
    w = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
    # 1: contact kept (0.17 < 0.9 × 0.2); 2: contact lost by 0.25 − 0.18; 3: gap kept; 4: gap kept, but inside the
    # margin (0.22 − 0.21); 5: gap closed by 0.22 − 0.15, weight 2; 6, 7: a source 3 % beyond d_min asks the target
    # to be 3 % beyond its own, not 10 %: 7 pays 0.206 − 0.205
    want = 0.07 ** 2 + 0.01 ** 2 + (2 * 0.07) ** 2 + 0.001 ** 2
    assert float(contact_state_loss(tgt, src, dmin_s, dmin_t, w, 0.1)) == pytest.approx(want, rel=1e-4)
    assert float(contact_state_loss(tgt, src, dmin_s, dmin_t, w, 0.1, torch.full((7,), 0.5))) == pytest.approx(
        0.5 * want, rel=1e-4)
