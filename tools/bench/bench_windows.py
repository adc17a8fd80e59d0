"""Long clips in windows in `make bench` (core.pipeline.windows): the same clip retargeted whole and as overlapping windows,
side by side (time, metrics, jerk at the seams), and the peak memory of windowed retargets of growing length.

    .venv/bin/python tools/bench/bench_windows.py [--frames 1000] [--window 300] [--overlap 60] [--threads 2]
        [--memory 3000 10000] [--quality balanced] [--case SOURCE TARGET]

Seams: for each window boundary, the largest joint jerk of the windowed result over the frames the crossfade
touches (3 before the overlap to its end) over the largest joint jerk of the whole-clip solve on the same frames
(1 = no spike; the two solves differ anyway, so a few tens of % either way is what two solves differ by);
and over the whole-clip solve's largest jerk anywhere. Memory: a child process per length, the windowed
retarget as the batch command runs it (metrics of the stitched clip and of copy-rotations included), 10 solver
steps per window (the solver's memory does not depend on the step count), peak RSS.
Called by tools/bench/run.py (after the scaling line); also runnable alone.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def joint_jerk(track_cls, character, motion) -> np.ndarray:
    """(T − 3,) the largest joint jerk (m/s³) per frame of ``motion`` on ``character``."""
    p = track_cls(character, motion).world_positions
    j = (p[3:] - 3 * p[2:-1] + 3 * p[1:-2] - p[:-3]) * motion.fps ** 3
    return np.linalg.norm(j, axis=-1).max(-1)


def compare(mods, src, motion, tgt, settings, plan) -> dict:
    """The whole-clip retarget and the windowed one of ``motion``: seconds, metrics, seam jerk ratios."""
    rt, win = mods["core.pipeline.retarget"], mods["core.pipeline.windows"]
    opts = rt.RetargetOptions(settings=settings, conflicts=False)
    t = time.perf_counter()
    whole = rt.run(rt.Retarget(src, motion, tgt, opts))
    t_whole = time.perf_counter() - t
    t = time.perf_counter()
    windowed = rt.run(win.WindowedRetarget(src, motion, tgt, opts, plan))
    t_win = time.perf_counter() - t
    track = mods["core.character.track"].ClipTrack
    jw, jo = joint_jerk(track, tgt, windowed.motion), joint_jerk(track, tgt, whole.motion)
    seams = []
    for a, _ in plan.ranges(motion.num_frames)[1:]:
        s = slice(max(a - 3, 0), min(a + plan.overlap, len(jw)))
        seams.append((float(jw[s].max() / max(jo[s].max(), 1e-9)), float(jw[s].max() / max(jo.max(), 1e-9))))
    return dict(whole=whole, windowed=windowed, t_whole=t_whole, t_win=t_win, seams=seams)


def memory_line(threads: int, frames: list, plan_args: list) -> tuple:
    """Peak RSS (MB) of a windowed retarget per clip length, each in a child process (tools/bench/run.py
    --memory-child N --memory-window W O)."""
    peaks = {}
    for n in frames:
        cmd = [sys.executable, str(ROOT / "tools" / "bench" / "run.py"), "--memory-child", str(n), "--threads", str(threads),
               "--memory-window", *map(str, plan_args)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        mem = [ln for ln in proc.stdout.splitlines() if ln.startswith("MEMORY ")]
        peaks[n] = json.loads(mem[0][7:]) if mem else None
        if not mem:
            print(proc.stderr[-2000:], file=sys.stderr)
    return peaks


def section(out, log, mods, loader, settings, args, scaling) -> dict:
    """The windows section of the bench (markdown through ``out``); returns {target label: (measured, pass)}."""
    plan = mods["core.pipeline.windows"].WindowPlan(args.window, args.overlap)
    src, smo, _ = loader.source(scaling[0])
    _, tgt, _ = loader.character(scaling[1])
    from common import tile
    motion = tile(mods["core.types"].Motion, smo, args.frames)
    log(f"windows: {args.frames} frames whole and in windows of {plan.length} / {plan.overlap}")
    r = compare(mods, src, motion, tgt, settings, plan)
    keys = ("grounded_f1", "locked_f1", "contact_f1", "floor_pen_mean", "self_pen_mean", "jerk_mean", "jerk_max")
    out()
    out(f"Long clips in windows (core.pipeline.windows; {pathlib.Path(scaling[0]).stem} ping-pong tiled to {args.frames} "
        f"frames → {pathlib.Path(scaling[1]).stem}; windows of {plan.length} frames sharing {plan.overlap}, "
        f"{len(plan.ranges(args.frames))} windows):")
    out()
    out("| run | seconds | " + " | ".join(keys) + " |")
    out("|---|---|" + "---|" * len(keys))
    for label, o, secs in (("copy-rot", None, None), ("whole clip", r["whole"], r["t_whole"]),
                           ("windows", r["windowed"], r["t_win"])):
        m = r["whole"].reference if o is None else o.metrics
        vals = [f"{100 * m[k]:.3f}%" if "pen" in k else (f"{m[k]:.1f}" if k.startswith("jerk") else f"{m[k]:.3f}")
                for k in keys]
        out(f"| {label} | {'' if secs is None else f'{secs:.1f}'} | " + " | ".join(vals) + " |")
    seam_local = max(s[0] for s in r["seams"])
    seam_global = max(s[1] for s in r["seams"])
    out()
    out(f"Seams: largest joint jerk around a seam over the whole-clip solve's on the same frames: "
        + ", ".join(f"{s[0]:.2f}" for s in r["seams"]) + f" (max {seam_local:.2f}); over the whole-clip solve's "
        f"largest anywhere: max {seam_global:.2f}.")
    targets = {"windows: no jerk spike at a seam (seam jerk ≤ the whole-clip solve's largest)":
               (f"{seam_global:.2f}×", seam_global <= 1.0)}
    wm, om = r["windowed"].metrics, r["whole"].metrics
    targets["windows: feet and contacts as the whole-clip solve (F1 within 0.03)"] = (
        ", ".join(f"{k} {wm[k]:.3f} vs {om[k]:.3f}" for k in ("grounded_f1", "locked_f1", "contact_f1")),
        all(wm[k] >= om[k] - 0.03 for k in ("grounded_f1", "locked_f1", "contact_f1")))
    if args.memory:
        peaks = memory_line(args.threads, args.memory, [plan.length, plan.overlap])
        ok = [n for n in args.memory if peaks.get(n)]
        out()
        out("Memory of a windowed retarget (child process per length, 10 solver steps per window, metrics of "
            "the stitched clip and copy-rotations): " + "; ".join(
                f"{n} frames: peak RSS {peaks[n]['peak_rss_mb']:.0f} MB ({peaks[n]['seconds']:.0f} s)" for n in ok))
        if len(ok) >= 2:
            lo, hi = peaks[ok[0]]["peak_rss_mb"], peaks[ok[-1]]["peak_rss_mb"]
            extra = (hi - peaks[ok[-1]]["base_rss_mb"]) / max(lo - peaks[ok[0]]["base_rss_mb"], 1.0)
            targets[f"windows: memory flat in the clip's length ({ok[0]} → {ok[-1]} frames)"] = (
                f"{lo:.0f} → {hi:.0f} MB (above the start: ×{extra:.2f} for ×{ok[-1] / ok[0]:.1f} frames)",
                hi < 2048 and extra < 0.5 * ok[-1] / ok[0])
    return targets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--quality", default="balanced", choices=("fast", "balanced", "best"))
    ap.add_argument("--case", nargs=2, metavar=("SOURCE", "TARGET"), default=None,
                    help="source clip and target character under ../shared/assets (default: the scaling line's)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    sys.path.insert(0, str(ROOT / "tools" / "render"))
    import common
    import torch
    torch.set_num_threads(args.threads)
    mods = common.enable_addon()
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    settings = mods["core.solver"].SolverSettings.preset(args.quality, num_threads=args.threads)
    case = tuple(args.case) if args.case else common.SCALING[:2]
    targets = section(print, log, mods, common.Loader(mods, log), settings, args, case)
    print()
    for label, (value, ok) in targets.items():
        print(f"| {label} | {value} | {'PASS' if ok else 'FAIL'} |")
    return 0


def add_arguments(ap):
    ap.add_argument("--frames", type=int, default=1000, help="length of the compared clip")
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("--overlap", type=int, default=60)
    ap.add_argument("--memory", type=int, nargs="*", default=[3000, 10000],
                    help="clip lengths of the memory children (none: skip)")
    ap.add_argument("--threads", type=int, default=2)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    import extension
    extension.exit_after(main)
