"""What the surface barrier reads at a result: on chosen frames, for each field, its deepest probe and that probe's
allowance (docs/solver.md "Self barrier": ALLOW·h, past the source's own depth there with
``surface.SOURCE_ALLOWANCE``), for ReConForM and copy-rotations. A probe over its allowance is what the barrier
pushes out; one at or under it is what the barrier allows, however deep the mesh measure reads the surface there.

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/barrier_reads.py --zoo ymca:short_arms [--frames 26:30] \\
        [--over 0.001] [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

``--cases``, ``--zoo``: as ``case_lines.py``; ``--frames A:B``: the frames read (0-based, B excluded; default the
whole clip); ``--over``: the depths listed, metres (default 1 mm). Each entry: probe segment > field, its depth / its
allowance in mm, and "over" where the barrier pushes. The allowance is the one the solve used: with ``--const
core.solver.surface.SOURCE_ALLOWANCE=False`` the resting press alone. Balanced preset, ../shared/assets needed.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def barrier_reads(core, outcome, source_motion, frames, over: float) -> dict:
    """{label: {frame: [(probe segment, field, depth m, allowance m)]}} for ReConForM and copy-rotations on
    ``frames`` of ``outcome`` (a retarget of ``source_motion``): each field's deepest probe deeper than ``over``.
    ``core``: ``common.core``."""
    sf, su = core("solver.surface_fields"), core("solver.surface")
    ClipTrack = core("character.track").ClipTrack
    tgt, src = outcome.target, outcome.source
    fields = sf.surface_fields(tgt)
    if fields is None:
        return {}
    allow = su.source_allowance(fields, src, ClipTrack(src, source_motion),
                                float(tgt.height) / float(src.height)).numpy()          # (T, Q, F) metres
    out = {}
    for label, motion in (("ReConForM", outcome.motion), ("copy-rot", outcome.init_motion)):
        d = su.surface_depths(fields, sf.world_points(fields, ClipTrack(tgt, motion))).numpy()   # (T, Q, F)
        rows = {}
        for t in frames:
            row = []
            for f, field in enumerate(fields.field_names):
                q = int(np.argmax(d[t, :, f]))
                if d[t, q, f] > over:
                    row.append((fields.probe_names[q], field, float(d[t, q, f]), float(allow[t, q, f])))
            rows[t] = row
        out[label] = rows
    return out


def main(argv=None) -> int:
    import bench_zoo
    import common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    ap.add_argument("--frames", default=None, help="A:B, the frames read (0-based, B excluded; default all)")
    ap.add_argument("--over", type=float, default=0.001, help="the depths listed, metres")
    args = ap.parse_args(argv)
    mods, loader, settings = common.variant_start(args)
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        outcome = common.retarget(mods, src, smo, tgt, settings, metrics=False)
        T = smo.rotations.shape[0]
        a, b = (0, T) if args.frames is None else (int(x) for x in args.frames.split(":"))
        print(f"== {label} ({T} frames)")
        for name, rows in barrier_reads(common.core, outcome, smo, range(a, min(b, T)), args.over).items():
            print(f"  {name}:")
            for t, row in rows.items():
                if row:
                    print(f"    frame {t}: " + "; ".join(
                        f"{p} > {f} {1000 * d:.1f} / {1000 * al:.1f} mm{' over' if d > al else ''}"
                        for p, f, d, al in row))
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
