"""Terrain retargets on the generated demo characters, with variants (docs/solver.md "Terrain").

    .venv/bin/python tools/experiments/terrain_variants.py [--grounds stairs ramp bumps] [--target TallThin]
        [--variants "[{}, {'spacing': 0.01}, {'raise_edges': False}, {'start': 'copy'}]"] [--quality balanced]

The demo's flat walk ('DemoWalk' of tools/make_demo_scene.py: ten 34 cm steps, 190 frames) on the generated
Source body is retargeted onto a generated target (TallThin 1.95 m or ShortHeavy 1.55 m) walking over a
procedural ground laid at its feet (core.contacts.terrain.shapes: 8 stairs of 17 cm x 30 cm, a 15° ramp, 4 cm bumps)
through core.pipeline.retarget (the one path). Variant keys: 'spacing' (grid, metres), 'raise_edges' (bool),
'start' ('terrain': the solve starts on the terrain, the default; 'copy': from copy-rotations at flat height,
as before terrain_start existed), 'hips_sigma_s' and 'hips_below' (core.solver.terrain_start.HIPS_SMOOTH_S,
HIPS_BELOW), and any SolverSettings field. Prints one row per ground and variant:
floor penetration mean/max, grounded F1, foot-locked F1, jerk mean, root jerk mean/max (docs/metrics.md, above the
sampled field), and, above the analytic ground, the share of the source's grounded foot-frames where the target's
lowest foot vertex is within 1 % h_c of the true surface and the deepest such vertex under it, for copy-rotations
and the result.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
import time
from dataclasses import replace

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import make_demo_scene  # noqa: E402
from core.body import SHORT_HEAVY, TALL_THIN, BodyParams, make_body  # noqa: E402
from core.character.complete import CharacterSpec, build_character  # noqa: E402
from core.pipeline.copy_rotations import copy_rotations  # noqa: E402
from core.metrics.measures import measure  # noqa: E402
from core.metrics.scores import GROUNDED_FRACTION  # noqa: E402
from core.pipeline.retarget import Retarget, RetargetOptions, clip_terrain, run  # noqa: E402
from core.solver import SolverSettings  # noqa: E402
from core.solver import job as solver_job  # noqa: E402
from core.solver import terrain_start  # noqa: E402
from core.contacts.terrain import sample_ground  # noqa: E402
from core.contacts.terrain.shapes import bumps, ramp, stairs  # noqa: E402
from core.character.track import ClipTrack  # noqa: E402

COLUMNS = ("floor_pen_mean", "floor_pen_max", "grounded_f1", "locked_f1", "jerk_mean", "root_jerk_mean",
           "root_jerk_max")
#: on the analytic ground (not the sampled field): over the foot-frames where the source's foot is grounded,
#: the share where the target's lowest foot vertex is within 1 % h_c of the true surface, and how deep the
#: deepest one is under it (cm; 0: none)
TRUE_COLUMNS = ("on_surface", "deepest_cm")
GROUNDS = {
    "stairs": lambda: stairs(start=(0.0, 0.6), direction=(0.0, -1.0), width=1.2, approach=1.3, steps=8, tread=0.3,
                             rise=0.17, landing=2.5),
    "ramp": lambda: ramp(start=(0.0, 0.6), direction=(0.0, -1.0), width=1.2, approach=1.2, length=2.0,
                         angle_deg=15.0, landing=2.5),
    "bumps": lambda: bumps(start=(0.0, 0.6), direction=(0.0, -1.0), width=1.2, length=5.0, amplitude=0.04),
}
TARGETS = {"TallThin": (TALL_THIN, "A"), "ShortHeavy": (SHORT_HEAVY, "T")}


def characters(target: str):
    sk, mesh, bm = make_body(BodyParams(name="source"), pose="T")
    walk, _ = make_demo_scene.walk_motion(sk, mesh)
    params, pose = TARGETS[target]
    tsk, tmesh, tbm = make_body(params, pose=pose)
    src = build_character(CharacterSpec(sk, mesh, bm), keyvert_count=41).character
    tgt = build_character(CharacterSpec(tsk, tmesh, tbm), keyvert_count=41, need_mesh=True).character
    return src, walk, tgt


def retarget(src, walk, tgt, surface, variant: dict, quality: str):
    v = dict(variant)
    spacing, raised, start = v.pop("spacing", None), v.pop("raise_edges", True), v.pop("start", "terrain")
    terrain_start.HIPS_SMOOTH_S = v.pop("hips_sigma_s", 0.1)
    terrain_start.HIPS_BELOW = v.pop("hips_below", True)
    surface = replace(surface, spacing=spacing) if spacing else surface
    ground = surface
    if not raised:   # the same region as the default, its edges not raised
        f = clip_terrain(surface, tgt, copy_rotations(src, walk, tgt))
        x0, y0 = f.report.origin
        nx, ny = f.report.grid
        region = (x0, x0 + (nx - 1) * f.report.spacing, y0, y0 + (ny - 1) * f.report.spacing)
        ground, _ = sample_ground(surface, region, dilate=False)
    original = solver_job.SolveJob._start_on_terrain
    if start == "copy":   # the solve's start left at copy-rotations' flat height (for comparison only)
        solver_job.SolveJob._start_on_terrain = lambda self, root_xy=None: None
    try:
        t = time.perf_counter()
        o = run(Retarget(src, walk, tgt, RetargetOptions(settings=SolverSettings.preset(quality, **v), ground=ground,
                                                         conflicts=False)))
        return o, time.perf_counter() - t
    finally:
        solver_job.SolveJob._start_on_terrain = original


def on_true_ground(src, walk, tgt, motion, height) -> dict:
    """TRUE_COLUMNS of ``motion`` against the analytic ``height(x, y)``."""
    import numpy as np

    planted = np.abs(measure(ClipTrack(src, walk), 0.0).foot_height) <= GROUNDED_FRACTION * src.height   # (2, T)
    lows = []
    for k, P in enumerate(ClipTrack(tgt, motion).foot_points):
        lows.append((P[..., 2] - height(P[..., 0], P[..., 1])).min(1)[planted[k]])
    low = np.concatenate(lows)
    return {"on_surface": float(np.mean(np.abs(low) <= GROUNDED_FRACTION * tgt.height)),
            "deepest_cm": float(max(0.0, -100 * low.min()))}


def fmt(v, k):
    if v != v:
        return "n/a"
    return f"{100 * v:.3f}%" if "pen" in k else (f"{v:.0f}" if "jerk" in k else f"{v:.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grounds", nargs="+", default=list(GROUNDS), choices=list(GROUNDS))
    ap.add_argument("--target", default="TallThin", choices=list(TARGETS))
    ap.add_argument("--variants", default="[{}]")
    ap.add_argument("--quality", default="balanced")
    args = ap.parse_args(argv)
    variants = ast.literal_eval(args.variants)
    src, walk, tgt = characters(args.target)
    print(f"DemoWalk ({walk.num_frames} frames) -> {args.target}, quality {args.quality}")
    print("| ground | variant | method | " + " | ".join(COLUMNS + TRUE_COLUMNS) + " | s |")
    print("|" + "---|" * (len(COLUMNS) + len(TRUE_COLUMNS) + 4))
    for g in args.grounds:
        shape = GROUNDS[g]()
        for v in variants:
            o, secs = retarget(src, walk, tgt, shape.surface, v, args.quality)
            for label, m, mo in (("copy-rot", o.reference, o.init_motion), ("ReConForM", o.metrics, o.motion)):
                true = on_true_ground(src, walk, tgt, mo, shape.height)
                print(f"| {g} | {v} | {label} | " + " | ".join(fmt(m[k], k) for k in COLUMNS) + " | "
                      + f"{true['on_surface']:.3f} | {true['deepest_cm']:.1f} | "
                      + (f"{secs:.0f} |" if label == "ReConForM" else " |"), flush=True)
            if o.ground is not None:
                print(f"|   | {o.ground.line()} | | " + " | " * len(COLUMNS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
