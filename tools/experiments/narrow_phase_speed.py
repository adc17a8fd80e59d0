"""Why ``core.contacts.partners._closer_than`` is a product: milliseconds of the narrow phase between two characters' key
vertices on a block of frames (the pairs closer than a limit), as the (F, N_a, N_b, 3) difference test and as the
batched product with the difference test on its candidates, at a refresh's sizes (600 frames of two 41-vertex
characters, and the 96-vertex extended set), on torch's CPU with the given threads; and whether both find the same
pairs.

    .venv/bin/python tools/experiments/narrow_phase_speed.py [--threads 1] [--repeat 30]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from core.contacts.partners import _closer_than  # noqa: E402
from core.rig.vec3 import sq_norm3  # noqa: E402
from vec3_speed import micros  # noqa: E402  (this script's folder is on sys.path)


def millis(fn, repeat: int) -> float:
    return micros(fn, repeat) / 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s); milliseconds per call (float32, two dancers "
          "within 1.7 m, limit 0.34 m)")
    print("frames × N_a × N_b | difference test | product + difference on its candidates | same pairs")
    for frames, n in ((600, 41), (600, 96)):
        pa = 1.7 * torch.rand((frames, n, 3), generator=g)
        pb = 1.7 * torch.rand((frames, n, 3), generator=g) + torch.tensor([0.3, 0.0, 0.0])
        limit = 0.34

        def difference():
            return torch.nonzero(sq_norm3(pa[:, :, None] - pb[:, None]) < limit * limit, as_tuple=True)

        def product():
            return _closer_than(pa, pb, limit)

        same = all(torch.equal(a, b) for a, b in zip(difference(), product()))
        print(f"{frames} × {n} × {n} | {millis(difference, args.repeat):.2f} | {millis(product, args.repeat):.2f} | "
              f"{same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
