"""core.rig.vec3: the sums over a last axis of length 3 equal torch's reductions, values and gradients."""

import torch

from core.rig import vec3
from core.rig.vec3 import dot3, norm3, sq_norm3


def test_vec3_equals_the_reductions_with_gradients():
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.float64):
        a = torch.randn((7, 5, 3), generator=g, dtype=dtype, requires_grad=True)
        b = torch.randn((7, 5, 3), generator=g, dtype=dtype, requires_grad=True)
        pairs = [(dot3(a, b), (a * b).sum(-1)), (sq_norm3(a), a.square().sum(-1)),
                 (norm3(a), a.norm(dim=-1)), (norm3(a, 1e-3), (a.square().sum(-1) + 1e-3).sqrt())]
        tol = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
        for got, want in pairs:
            assert got.shape == want.shape == (7, 5) and got.dtype == dtype
            torch.testing.assert_close(got, want, **tol)
            w = torch.randn(want.shape, generator=g, dtype=dtype)
            ga = torch.autograd.grad((got * w).sum(), (a, b), allow_unused=True)
            gw = torch.autograd.grad((want * w).sum(), (a, b), allow_unused=True)
            for x, y in zip(ga, gw):
                assert (x is None) == (y is None)
                if x is not None:
                    torch.testing.assert_close(x, y, **tol)


def test_vec3_promotes_mixed_dtypes_and_keeps_a_finite_gradient_with_eps():
    a32 = torch.ones((4, 3), dtype=torch.float32)
    b64 = torch.full((4, 3), 2.0, dtype=torch.float64)
    out = dot3(a32, b64)
    assert out.dtype == torch.float64 and torch.equal(out, torch.full((4,), 6.0, dtype=torch.float64))
    x = torch.zeros((2, 3), requires_grad=True)
    norm3(x, 1e-24).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_vec3_after_an_inference_mode_block_still_gives_gradients():
    vec3._ONES.clear()
    with torch.inference_mode():
        sq_norm3(torch.ones((2, 3)))                   # the cached ones are made here first
    x = torch.ones((2, 3), requires_grad=True)
    sq_norm3(x).sum().backward()
    assert torch.equal(x.grad, torch.full((2, 3), 2.0))
