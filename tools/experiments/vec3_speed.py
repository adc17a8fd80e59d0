"""Why ``core.rig.vec3`` exists: microseconds of a sum over a last axis of length 3 (squared lengths, dot products) as
torch's reduction and as a product with a vector of ones, forward and forward + backward, at the sizes the solver
uses (pair entries, capsule depths, move bounds), on torch's CPU with the given threads.

    .venv/bin/python tools/experiments/vec3_speed.py [--threads 1] [--repeat 200]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from core.rig.vec3 import sq_norm3  # noqa: E402


def micros(fn, repeat: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s); microseconds per call")
    print("shape | reduction .square().sum(-1) | sq_norm3 | reduction, fwd+bwd | sq_norm3, fwd+bwd")
    for shape in ((2_000, 3), (20_000, 3), (600, 21, 2, 3), (300, 89, 3)):
        x = torch.randn(shape, requires_grad=True)

        def back(f):
            x.grad = None
            f(x).sum().backward()
        red, vec = (lambda v: v.square().sum(-1)), sq_norm3
        with torch.no_grad():
            a, b = micros(lambda: red(x), args.repeat), micros(lambda: vec(x), args.repeat)
        c, d = micros(lambda: back(red), args.repeat), micros(lambda: back(vec), args.repeat)
        print(f"{shape} | {a:.0f} | {b:.0f} | {c:.0f} | {d:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
