"""Where an artist's time goes (issue 16): the first solve of a 300-frame clip, a warm-started re-solve after a
conflict slider, a 75-frame window (alone, and as the panel's Live solves it), and one solver step taken apart.

    .venv/bin/python tools/bench/bench_artist.py [--frames 300] [--window 75] [--threads 2] [--repeat 3] [--parts]
        [--set NAME=VALUE ...]

The case of the issue: the Bandai kick (tiled to --frames) onto mh_teen_girl, 'balanced' preset; every run goes
through core.pipeline.retarget (copy-rotations, the solver's set-up and its steps; no metrics, no conflicts), as the
panel's Retarget and Re-solve do (the re-solve: the panel's slider path, ``operators.retarget.start_resolve``:
the last result as warm start continuing the first solve's optimiser and set-up (``core.solver.continued``), α
held at 1, ``core.solver.CONTINUE``'s share of the steps, one per-part weight changed).
Medians of --repeat runs in one process. With --parts, then one step of the first solve, part by part (forward,
and forward plus backward), median of 20 after 5 warm-up steps. `make bench` prints the three times and the
issue's targets (tools/bench/run.py calls ``section``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))
CASE = ("motions/NC_bandai_kick_normal_001.bvh", "characters/mh_teen_girl.glb")
#: frames between two Live windows in the scrub line
SCRUB = 5


def timed(fn, n):
    """Median seconds of ``n`` calls of ``fn``."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def load_case(mods, loader, frames: int = 300) -> tuple:
    """(source, target, the source clip tiled to ``frames``) of the issue's case, from the bench's loader."""
    import common
    src, smo, _ = loader.source(CASE[0])
    _, tgt, _ = loader.character(CASE[1])
    return src, tgt, common.tile(mods["core.types"].Motion, smo, frames)


def issue_case(frames: int = 300, threads: int = 1) -> tuple:
    """(modules, source, target, the clip tiled to ``frames``) of the issue's case with torch on ``threads``: the
    add-on enabled and the bench's loader, as the experiments on this case start."""
    import torch
    torch.set_num_threads(threads)
    import common
    mods = common.enable_addon()
    return (mods,) + load_case(mods, common.Loader(mods, lambda s: None), frames)


def measure(mods, loader, threads: int, frames: int = 300, window: int = 75, repeat: int = 3,
            overrides: dict = None) -> dict:
    """Median seconds of the first solve, the re-solve and the window's solve (see the module docstring), and the
    first solve's Outcome; ``overrides``: SolverSettings fields over the 'balanced' preset."""
    import common
    src, tgt, motion = load_case(mods, loader, frames)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=threads, **(overrides or {}))
    opts = rt.RetargetOptions(settings=settings, metrics=False, conflicts=False)
    first = rt.run(rt.Retarget(src, motion, tgt, opts))
    t_first = timed(lambda: rt.run(rt.Retarget(src, motion, tgt, opts)), repeat)
    resolve_settings = dataclasses.replace(settings, part_weights={("left_leg", "sliding"): 2.0})
    re_opts = dataclasses.replace(opts, settings=resolve_settings, init_motion=first.init_motion,
                                  warm_start=first.motion, warm_sixd=first.job.result_sixd(),
                                  warm_state=first.job.optim, warm_job=first.job)
    t_resolve = timed(lambda: rt.run(rt.Retarget(first.source, motion, first.target, re_opts,
                                                 source_track=first.source_track)), repeat)
    t_window = timed(lambda: rt.run(rt.Retarget(src, motion.slice(0, window), tgt, opts)), repeat)
    # the panel's Live: the clip set up once (core.pipeline.live), then the window around a frame, as a scrub solves it
    live = importlib.import_module(f"{common.MODULE}.core.pipeline.live").LiveClip(src, motion, tgt, opts, length=window)
    rt.run(live.prepare())
    frames_at = iter([motion.frame_start + (k * 97) % frames for k in range(1, repeat + 1)])
    t_live = timed(lambda: rt.run(live.solve(next(frames_at))), repeat)
    # a scrub of SCRUB frames: the next window starts from the last one (core.pipeline.live warm start)
    at = motion.frame_start + frames // 2
    last = rt.run(live.solve(at))
    t_scrub = timed(lambda: rt.run(live.solve(at + SCRUB, last)), repeat)
    warm, cold = rt.run(live.solve(at + SCRUB, last)), rt.run(live.solve(at + SCRUB))
    return dict(first=t_first, resolve=t_resolve, window=t_window, live=t_live, scrub=t_scrub,
                scrub_relative=(warm.relative, cold.relative, warm.warm), outcome=first, motion=motion,
                settings=settings,
                frames=frames, window_frames=window,
                resolve_steps=settings.num_steps(warm=True, schedule=solver.CONTINUE))


def section(out, mods, loader, threads: int) -> dict:
    """The artist-loop line of `make bench`; returns {target label: (measured, pass)} (issue 16's targets)."""
    r = measure(mods, loader, threads)
    out()
    out(f"Artist loop ({pathlib.Path(CASE[0]).stem} tiled to {r['frames']} frames → {pathlib.Path(CASE[1]).stem}, "
        f"'balanced', {threads} threads, medians of 3, load average {os.getloadavg()[0]:.1f}): first solve "
        f"{r['first']:.2f} s (copy-rotations, set-up, {r['settings'].iterations} steps); re-solve after a slider "
        f"{r['resolve']:.2f} s ({r['resolve_steps']} warm-started steps); a {r['window_frames']}-frame window "
        f"{r['window']:.2f} s; Live, the window around a frame on a clip set up once {r['live']:.2f} s, after a "
        f"{SCRUB}-frame scrub (from the last window) {r['scrub']:.2f} s")
    return {f"artist: first solve of {r['frames']} frames < 3 s": (f"{r['first']:.2f} s", r["first"] < 3.0),
            "artist: re-solve after a slider < 0.5 s": (f"{r['resolve']:.2f} s", r["resolve"] < 0.5),
            f"artist: a {r['window_frames']}-frame window < 0.5 s": (f"{r['window']:.2f} s", r["window"] < 0.5),
            f"artist: a {r['window_frames']}-frame Live window < 0.5 s": (f"{r['live']:.2f} s", r["live"] < 0.5),
            f"artist: a Live window after a {SCRUB}-frame scrub < 0.5 s": (f"{r['scrub']:.2f} s", r["scrub"] < 0.5)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--window", type=int, default=75)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parts", action="store_true", help="also one solver step, part by part")
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable)")
    args = ap.parse_args(argv)
    import common
    import torch
    torch.set_num_threads(args.threads)
    mods = common.enable_addon()
    loader = common.Loader(mods, lambda s: None)
    r = measure(mods, loader, args.threads, args.frames, args.window, args.repeat, common.setting_overrides(args.set))
    first, motion, settings = r["outcome"], r["motion"], r["settings"]
    print(f"torch {torch.__version__}, {args.threads} threads, load average {os.getloadavg()[0]:.1f}; "
          f"{pathlib.Path(CASE[0]).stem} -> {pathlib.Path(CASE[1]).stem}, 'balanced' ({settings.iterations} steps)"
          + (f", overrides {args.set}" if args.set else ""))
    print(f"first solve, {args.frames} frames (copy-rotations + set-up + {settings.iterations} steps): "
          f"{r['first']:.2f} s ({first.timings['copy_rotations_s']:.2f} s copy-rotations, set-up "
          f"{first.solver_stats['setup_s']:.2f} s)")
    print(f"re-solve after a slider ({r['resolve_steps']} warm-started steps): {r['resolve']:.2f} s")
    print(f"{args.window}-frame window, first solve: {r['window']:.2f} s")
    print(f"{args.window}-frame Live window (the clip set up once, core.pipeline.live): {r['live']:.2f} s")
    w, c, was_warm = r["scrub_relative"]
    print(f"the Live window after a {SCRUB}-frame scrub, from the last window: {r['scrub']:.2f} s (warm start: "
          f"{was_warm}); objective over copy-rotations' {w:.3f}, against {c:.3f} solved from copy-rotations")
    if not args.parts:
        return 0

    # one step of the first solve, part by part
    job_mod = importlib.import_module(f"{common.MODULE}.core.solver.job")
    optim = importlib.import_module(f"{common.MODULE}.core.solver.optim")
    job = job_mod.SolveJob(first.source, motion, first.target, first.init_motion, settings,
                           source_track=first.source_track)
    job.setup()
    par = job.param

    def median_ms(fn, n=20):
        for _ in range(3):
            fn()
        return 1000 * timed(fn, n)

    def rig():
        d, off = par.frame_residuals()
        return job.vars(par.local_rotations(d), par.root_location(off))

    def rig_back():
        for p in par.params:
            p.grad = None
        p, n = rig()
        (p.sum() + n.sum()).backward()
    with optim.torch_threads(settings.num_threads):
        for _ in range(5):
            job._adam_step()
        whole_step = median_ms(job._adam_step)
        alpha = 0.5
        p, n, sole = (x.detach() for x in job._forward())
        job._root_world = job._root_world.detach()
        if job.own_barrier is not None:     # the own barrier reads the step's body points, not an argument
            job.body_positions = job.body_positions.detach()
        pairs = job.objective.pairs.active(p, alpha)

        def objective_back():
            q, m, s = (x.clone().requires_grad_() for x in (p, n, sole))
            sum(job.terms_at(q, m, s, alpha, pairs).values()).backward()
        parts = {
            "whole step (forward, backward, Adam)": whole_step,
            "FK + skinning, forward": median_ms(rig),
            "FK + skinning, forward + backward": median_ms(rig_back),
            f"active pairs ({len(pairs)} entries)": median_ms(lambda: job.objective.pairs.active(p, alpha)),
            "objective, forward": median_ms(lambda: job.terms_at(p, n, sole, alpha, pairs)),
            "objective, forward + backward": median_ms(objective_back),
        }
    print(f"one step of the first solve ({args.frames} frames; {len(job.vars.vk)} variable bones in "
          f"{len(job.vars.levels)} tree levels, {job.vars.W_var.shape[0]} key vertices and sole points), ms:")
    for k, v in parts.items():
        print(f"  {k}: {v:.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
