import numpy as np
import pytest
import torch

from core.descriptors import height
from core.terrain import HeightField, ground_height


def test_height_field_is_bilinear_and_differentiable():
    hf = HeightField.from_function(lambda x, y: 0.5 * x + 0.25 * y, (-2, 2), (-2, 2), resolution=9)
    x = torch.tensor([0.3, -1.1], requires_grad=True)
    y = torch.tensor([0.7, 1.9], requires_grad=True)
    z = hf(x, y)
    assert z.tolist() == pytest.approx([0.5 * 0.3 + 0.25 * 0.7, 0.5 * -1.1 + 0.25 * 1.9], abs=1e-6)
    z.sum().backward()
    assert x.grad.tolist() == pytest.approx([0.5, 0.5]) and y.grad.tolist() == pytest.approx([0.25, 0.25])
    p = torch.tensor([[[0.3, 0.7, 1.0]]])
    assert height(p, hf)[0, 0] == pytest.approx(1.0 - 0.325, abs=1e-6)


def test_ground_height_takes_a_level_levels_per_frame_or_a_field():
    x = torch.zeros((4, 3), dtype=torch.float64)
    y = torch.ones((4, 3), dtype=torch.float64)
    assert torch.equal(ground_height(0.25, x, y), torch.full((4, 3), 0.25, dtype=torch.float64))
    levels = np.arange(10.0)
    g = ground_height(levels, x, y, slice(3, 7))          # rows 3..6 of a 10-frame clip
    np.testing.assert_array_equal(g.numpy(), np.repeat(np.arange(3.0, 7.0)[:, None], 3, 1))
    hf = HeightField.from_function(lambda a, b: a + b, (-1, 1), (-1, 2), resolution=5)
    np.testing.assert_allclose(ground_height(hf, x, y).numpy(), 1.0, atol=1e-12)
