"""Terrain cases of `make bench` (ReConForM §6.2): a walk captured on flat ground, retargeted onto a target
walking up and down stairs, up a ramp and over bumpy ground; copy-rotations and ReConForM side by side.

    .venv/bin/python tools/bench/bench_terrain.py [--quality balanced] [--threads 2] [--cases 3] [--flat] \
        [--set NAME=VALUE] [--const core.MODULE.NAME=VALUE]

Each ground (``core.contacts.terrain.shapes``) is laid along the target's copy-rotations path (its hips from the first
to the last frame), starting 1.5 m before the first foot; the retarget runs the one path (``core.pipeline.retarget``
with ``RetargetOptions(ground=...)``, as the panel's Ground picker and the batch command's --ground do).
Metrics are read above the terrain for the target and above its own floor for the source (docs/metrics.md).
A "source" row gives the source's own jerk (the reference for the root's smoothness); ``--flat`` adds the same
retarget on the floor z = 0 (what the terrain itself adds to the jerk).
Called by tools/bench/run.py (after the flat cases); also runnable alone.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: (source clip, target character, ground) from ../shared/assets
CASES = [
    ("motions/NC_bandai_walk_normal_001.bvh", "characters/mh_male_heavy.glb", "stairs"),
    ("motions/NC_bandai_walk_normal_001.bvh", "characters/mh_female_thin_tall.glb", "ramp"),
    ("motions/NC_bandai_walk_normal_001.bvh", "characters/mh_teen_girl.glb", "bumps"),
]
COLUMNS = ("floor_pen_mean", "floor_pen_max", "grounded_f1", "locked_f1", "jerk_mean", "root_jerk_mean",
           "root_jerk_max")


def lay_ground(shapes, kind: str, start, direction, length: float):
    """A procedural ground of ``kind`` along ``direction`` from ``start`` (x, y), covering ``length`` metres."""
    if kind == "stairs":      # 8 steps of 17 cm up (30 cm treads), a 2 m landing, 8 steps down, flat
        return shapes.stairs(start, direction, width=3.0, approach=1.5, steps=8, tread=0.3, rise=0.17,
                             landing=max(2.0, length - 1.5 - 4.8), steps_down=8).surface
    if kind == "ramp":        # 15° up for 3 m (0.80 m), then flat
        return shapes.ramp(start, direction, width=3.0, approach=1.5, length=3.0, angle_deg=15.0,
                           landing=max(2.0, length - 4.5)).surface
    return shapes.bumps(start, direction, width=3.0, length=length + 1.0, amplitude=0.04, wavelength=0.7).surface


def terrain_case(core, src, motion, tgt, kind: str, settings, flat: bool = False):
    """One terrain retarget: (outcome, the ground's GroundSurface, seconds); ``flat``: also the same retarget
    on the floor z = 0, (outcome, ground, seconds, flat outcome)."""
    import numpy as np

    rt, cr, tr, shapes = (core(n) for n in ("core.pipeline.retarget", "core.pipeline.copy_rotations", "core.character.track",
                                            "core.contacts.terrain.shapes"))
    flat = cr.copy_rotations(src, motion, tgt)
    track = tr.ClipTrack(tgt, flat)
    hips = track.world_positions[:, tgt.skeleton.index(tgt.bone_map["hips"]), :2]
    d = hips[-1] - hips[0]
    length = float(np.linalg.norm(d))
    d = d / max(length, 1e-9)
    feet = np.concatenate([p[0, :, :2] for p in track.foot_points])
    first = float(((feet - hips[0]) @ d).min())                        # the first foot's back edge, along d
    start = hips[0] + (first - 1.5) * d
    surface = lay_ground(shapes, kind, start, d, length + 3.0)
    t = time.perf_counter()
    out = rt.run(rt.Retarget(src, motion, tgt, rt.RetargetOptions(settings=settings, ground=surface,
                                                                 conflicts=False)))
    secs = time.perf_counter() - t
    if not flat:
        return out, surface, secs
    return out, surface, secs, rt.run(rt.Retarget(src, motion, tgt, rt.RetargetOptions(settings=settings,
                                                                                         conflicts=False)))


def fmt(v, k):
    if v != v:
        return "n/a"
    if "pen" in k:
        return f"{100 * v:.3f}%"
    return f"{v:.1f}" if "jerk" in k else f"{v:.3f}"


def bench_terrain(core, loader, settings, cases=None, out=print, log=print, flat: bool = False):
    """Run the terrain section: one table row per method and case (and the source's jerk), and a line per
    ground. ``core(name)`` returns a core module; ``loader`` has ``source(rel)`` -> (Character, Motion, s) and
    ``character(rel)`` -> (arm, Character, s) (tools/bench/run.py's Loader); ``flat``: a row more per case, the
    same retarget on the floor z = 0."""
    import numpy as np

    out("")
    out("Terrain (ReConForM §6.2): the flat-ground walk onto a target walking on a ground object; target "
        "metrics above the terrain, the source above its floor (docs/metrics.md). Root jerk: the hips alone.")
    out("")
    out("| clip → target, ground | method | " + " | ".join(COLUMNS) + " | footing shift max | s |")
    out("|" + "---|" * (len(COLUMNS) + 4))
    rows = []
    for clip, target, kind in (cases or CASES):
        src, smo, _ = loader.source(clip)
        _, tgt, _ = loader.character(target)
        log(f"terrain case {clip} -> {target} on {kind}")
        o, surface, secs, *on_floor = terrain_case(core, src, smo, tgt, kind, settings, flat)
        name = f"{pathlib.Path(clip).stem} → {pathlib.Path(target).stem}, {kind}"
        shift = o.solver_stats.get("terrain_footing_shift_max_m", float("nan"))
        m = o.metrics
        out(f"| {name} | source (its flat floor) | " + " | ".join(
            fmt(m["source_" + k], k) if "jerk" in k else "" for k in COLUMNS) + " | | |")
        for label, m in (("copy-rot", o.reference), ("ReConForM", o.metrics)):
            out(f"| {name} | {label} | " + " | ".join(fmt(m[k], k) for k in COLUMNS)
                + (f" | {100 * shift:.1f} cm | {secs:.0f} |" if label == "ReConForM" else " | | |"))
        if on_floor:
            out(f"| {name} | ReConForM on z = 0 (no terrain) | "
                + " | ".join(fmt(on_floor[0].metrics[k], k) for k in COLUMNS) + " | | |")
        g = o.ground
        out(f"|   ground: {g.line()}, heights {g.height_range[0]:.2f} to {g.height_range[1]:.2f} m, built in "
            f"{g.seconds:.2f} s, result's feet outside it on {g.outside_frames} frames |" + " |" * (len(COLUMNS) + 3))
        rows.append((o.reference, o.metrics) + tuple(f.metrics for f in on_floor))
    if rows:
        out("")
        for k in ("floor_pen_mean", "grounded_f1", "locked_f1", "jerk_mean", "root_jerk_mean"):
            a = np.mean([r[0][k] for r in rows])
            b = np.mean([r[1][k] for r in rows])
            extra = f", source {fmt(np.mean([r[1]['source_' + k] for r in rows]), k)}" if "jerk" in k else ""
            if flat:
                extra += f", ReConForM on z = 0 {fmt(np.mean([r[2][k] for r in rows]), k)}"
            out(f"- {k}: copy-rotations {fmt(a, k)} → ReConForM {fmt(b, k)}{extra} (mean over the {len(rows)} "
                "grounds)")
    return rows


def main(argv=None):
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    sys.path.insert(0, str(ROOT / "tools" / "render"))
    import importlib

    import common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quality", default="balanced", choices=("fast", "balanced", "best"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", type=int, default=None, help="only the first N cases")
    ap.add_argument("--flat", action="store_true", help="also each retarget on the floor z = 0 (a row more per case)")
    common.add_variant_arguments(ap)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    mods = common.enable_addon()
    core = lambda name: importlib.import_module(f"{common.MODULE}.{name}")  # noqa: E731
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    settings = common.variant_settings(core("core.solver"), args)
    bench_terrain(core, common.Loader(mods, log), settings, CASES[:args.cases] if args.cases else CASES, log=log,
                  flat=args.flat)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    import extension
    extension.exit_after(main)
