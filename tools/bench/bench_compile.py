"""`make bench`, the compiled pose map on the CPU (``SolverSettings.compile``, issue 16 item 1): the scaling line's
retarget with the pose map and its dense terms compiled by ``torch.compile`` against the eager solve, in one
process (docs/solver.md "Compiled pose map (`compile`, an option)").

    .venv/bin/python tools/bench/bench_compile.py [--frames 75 300] [--repeat 2] [--threads 1]

Per clip length: the first compiled retarget (which compiles, or loads torch's on-disk cache of an earlier
process), then eager and compiled retargets in turn, ``--repeat`` of each; printed: the first run's seconds, the
medians, their ratio and the largest bone-rotation difference between the two results (float32 rounding: the
compiled kernels sum in another order). Timed as the scaling line: copy-rotations plus the solve with its set-up,
no metrics (``common.retarget``).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

from bench_gpu import angles_deg  # noqa: E402  (the GPU line's rotation difference, the same measure)


def section(out, retarget, tile, src, smo, tgt, settings, frames=(75, 300), repeat=2, log=print) -> dict:
    """Write the compiled-pose line through ``out``; returns {target: (value, pass)}: the compiled solve is faster
    than the eager one at every length, and its results within 5° of the eager ones. ``retarget(src, motion, tgt,
    settings)`` returns the product's Outcome without metrics; ``tile(motion, frames)`` the clip at a length."""
    eager = dataclasses.replace(settings, compile=False)
    compiled = dataclasses.replace(settings, compile=True)
    rows, ratios, diffs, errors = [], [], [], set()

    def run(s, mo):
        t = time.perf_counter()
        o = retarget(src, mo, tgt, s)
        if s.compile and o.solver_stats.get("compile_error"):
            errors.add(o.solver_stats["compile_error"])
        return time.perf_counter() - t, o.motion.rotations

    for n in frames:
        mo = tile(smo, n)
        first, rot_c = run(compiled, mo)
        times = {False: [], True: []}
        for _ in range(repeat):
            for s in (eager, compiled):
                dt, rot = run(s, mo)
                times[s.compile].append(dt)
                if not s.compile:
                    rot_e = rot
        e, c = statistics.median(times[False]), statistics.median(times[True])
        ratios.append(c / e)
        diffs.append(float(angles_deg(rot_e, rot_c).max()))
        rows.append(f"{n} frames: first compiled run {first:.1f} s, then eager {e:.2f} s, compiled {c:.2f} s "
                    f"(compiled / eager {c / e:.2f}), largest rotation difference {diffs[-1]:.3f}°")
        log(f"  compiled pose {n}: {c / e:.2f}")
    out(f"Compiled pose map on the CPU (`compile`, an option; {settings.num_threads} thread(s), medians of {repeat} "
        "interleaved runs after the first): " + "; ".join(rows)
        + (f". Compiling failed, the solves ran eagerly: {'; '.join(sorted(errors))}" if errors else ""))
    return {"compiled pose map faster than eager at every length (CPU)": (
                ", ".join(f"{r:.2f}" for r in ratios), not errors and all(r < 1.0 for r in ratios)),
            "compiled pose map within 5° of eager (largest rotation difference)": (
                ", ".join(f"{d:.3f}°" for d in diffs), all(d < 5.0 for d in diffs))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[75, 300])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch
    import common
    torch.set_num_threads(args.threads)
    mods = common.enable_addon()
    loader = common.Loader(mods, lambda s: None)
    src, smo, _ = loader.source(common.SCALING[0])
    _, tgt, _ = loader.character(common.SCALING[1])
    settings = mods["core.solver"].SolverSettings(num_threads=args.threads)
    targets = section(print, lambda *a: common.retarget(mods, *a, metrics=False),
                      lambda m, n: common.tile(mods["core.types"].Motion, m, n), src, smo, tgt, settings,
                      args.frames, args.repeat)
    for k, (v, ok) in targets.items():
        print(f"| {k} | {v} | {'PASS' if ok else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
