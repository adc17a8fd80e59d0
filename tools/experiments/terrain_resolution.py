"""Grid spacing of the terrain height field: error against analytic grounds, and cost (docs/solver.md "Terrain").

    .venv/bin/python tools/experiments/terrain_resolution.py [--points 20000]

For each spacing, on the procedural grounds of ``core.contacts.terrain.shapes`` sampled by
``core.contacts.terrain.sample_ground`` (the path a ground object takes):
- ramp (15°, with its two kinks): largest and mean |field − analytic|;
- stairs (17 cm rise, 30 cm tread), with and without the raised edges (``raise_edges``): the largest depth by
  which the field lies *under* a tread (what the solver would let a foot sink into), and the width of the band
  in front of each riser where it lies more than 1 mm *over* the lower tread (where a foot is lifted early);
- bumps (4 cm, a mesh every 2.5 cm): largest and mean |field − mesh| (the mesh's own heights on a 3 mm grid);
- cost: samples and MB for a 6 × 2 m footprint, build seconds, and one solver step's terrain reads
  (200 frames × 100 points, float32, value and gradient) in microseconds (median of 50).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from core.contacts.terrain import sample_ground, vertical_hits  # noqa: E402
from core.contacts.terrain.shapes import bumps, ramp, stairs  # noqa: E402

SPACINGS = (0.005, 0.01, 0.02, 0.04, 0.08)


def _with_spacing(surface, s):
    from dataclasses import replace
    return replace(surface, spacing=s)


def _mesh_top(surface, xs, ys):
    cells, z, _ = vertical_hits(surface.vertices, surface.triangles, xs, ys)
    top = np.full(len(xs) * len(ys), -np.inf)
    np.maximum.at(top, cells, z)
    return top


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    # edges and kinks off the grid lines (an offset no spacing divides), as a scene's would be
    rp = ramp(start=(0.0, 0.0137), direction=(0.0, -1.0), approach=1.0, length=2.5, angle_deg=15.0, landing=2.5)
    st = stairs(start=(0.0, 0.0137), direction=(0.0, -1.0), approach=1.0, steps=8, tread=0.3, rise=0.17,
                landing=2.0)
    bp = bumps(start=(0.0, 0.0), direction=(0.0, -1.0), length=6.0, width=2.0)
    region = (-0.7, 0.7, -5.8, -0.2)
    xy = rng.uniform([region[0], region[2]], [region[1], region[3]], (args.points, 2))
    fine_x, fine_y = np.linspace(-0.5, 0.5, 301), np.linspace(-4.0, -1.0, 901)
    bump_mesh = _mesh_top(bp.surface, fine_x, fine_y)
    FX, FY = np.meshgrid(fine_x, fine_y, indexing="ij")
    fine = np.stack([FX.ravel(), FY.ravel()], 1)
    s_riser = 0.0137 - xy[:, 1] - 1.0                           # along the stairs from the first riser
    before = (np.ceil(s_riser / 0.3) * 0.3 - s_riser)           # distance to the next riser ahead
    print("| spacing | ramp max | ramp mean | stairs under max (raised / plain) | band over lower tread (raised / "
          "plain) | bumps max | bumps mean | samples 6x2 m | MB | build s | step reads µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in SPACINGS:
        hf, _ = sample_ground(_with_spacing(rp.surface, s), region)
        e = np.abs(hf.at(xy) - rp.height(xy[:, 0], xy[:, 1]))
        ramp_max, ramp_mean = e.max(), e.mean()
        under, band = [], []
        for dilate in (True, False):
            hf, _ = sample_ground(_with_spacing(st.surface, s), region, dilate=dilate)
            d = hf.at(xy) - st.height(xy[:, 0], xy[:, 1])
            under.append(max(0.0, -d.min()))
            over = (d > 1e-3) & (s_riser > 0) & (s_riser < 8 * 0.3)
            band.append(before[over].max() if over.any() else 0.0)
        hf, _ = sample_ground(_with_spacing(bp.surface, s), region)
        eb = np.abs(hf.at(fine) - bump_mesh)
        t = time.perf_counter()
        hf, rep = sample_ground(_with_spacing(st.surface, s), (-1.0, 1.0, -6.0, 0.0))
        build = time.perf_counter() - t
        px = torch.tensor(rng.uniform(-1, 1, (200, 100)), dtype=torch.float32, requires_grad=True)
        py = torch.tensor(rng.uniform(-6, 0, (200, 100)), dtype=torch.float32, requires_grad=True)
        times = []
        for _ in range(50):
            t = time.perf_counter()
            hf(px, py).sum().backward()
            times.append(time.perf_counter() - t)
        print(f"| {100 * s:g} cm | {1000 * ramp_max:.2f} mm | {1000 * ramp_mean:.3f} mm | "
              f"{1000 * under[0]:.1f} / {1000 * under[1]:.1f} mm | {100 * band[0]:.1f} / {100 * band[1]:.1f} cm | "
              f"{1000 * eb.max():.2f} mm | {1000 * eb.mean():.3f} mm | {rep.samples} | "
              f"{hf.heights.nbytes / 2 ** 20:.2f} | {build:.3f} | {1e6 * np.median(times):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
