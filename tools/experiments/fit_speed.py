"""A warm start's least-squares fit of the residual's controls to a motion (``Parametrisation.fit_to``), by the
dense pseudo-inverse of the (T, C) basis (the code before 2026-11-28) and by ``knots.Band.fitter`` (normal
equations from each frame's four weights), on uniform grids of long clips (docs/solver.md "The upper body's knots").

    .venv/bin/python tools/experiments/fit_speed.py [--frames 10000] [--spacing 3 12] [--threads 1]

Prints, per grid, the seconds of each and their largest difference on random values (Jo · 6 = 132 columns).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--spacing", type=float, nargs="+", default=[3.0, 12.0], help="frames between control points")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    from core.solver.knots import uniform_band
    torch.set_num_threads(args.threads)
    y = torch.as_tensor(np.random.default_rng(0).standard_normal((args.frames, 132)))
    print(f"{args.frames} frames, {args.threads} thread(s)")
    print("spacing (frames) | controls | pseudo-inverse s | Band.fitter s | largest difference")
    for spacing in args.spacing:
        band = uniform_band(args.frames, spacing)
        t = time.perf_counter()
        dense = torch.linalg.pinv(torch.as_tensor(band.dense())) @ y
        t_pinv = time.perf_counter() - t
        t = time.perf_counter()
        fitted = band.fitter()(y)
        t_band = time.perf_counter() - t
        print(f"{spacing:g} | {band.num_controls} | {t_pinv:.2f} | {t_band:.2f} | {float((dense - fitted).abs().max()):.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
