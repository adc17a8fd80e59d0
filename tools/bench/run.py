"""`make bench`: copy-rotations vs ReConForM on clips x characters from ../shared/assets.

Prints one table (every metric of docs/metrics.md for both methods side by side, solver and end-to-end frames/s),
the terrain cases (tools/bench/bench_terrain.py: a flat walk onto stairs, a ramp and bumps), the morphology zoo
(tools/bench/bench_zoo.py: four self-contact clips onto eight generated bodies of extreme shapes), a scaling line
(solver frames/s at 75, 300, 1000 and 3000 frames) and its GPU lines when torch sees CUDA (tools/bench/bench_gpu.py: 75,
1 000 and 10 000 frames, against the CPU), an artist's loop (tools/bench/bench_artist.py: a first solve of 300 frames, a
re-solve after a slider, a 75-frame window) and the peak memory of a 10 000-frame retarget with its metrics and
conflicts, and its longest stretch without a progress step (measured in a child process), the long-clip windows section
(tools/bench/bench_windows.py: a clip whole and in windows, seams, memory by length), and writes the same text to
bench_output/bench.md. Per case of the single-pair table, the frame of ReConForM's largest mesh self-penetration
and of its largest contact depth are rendered with copy-rotations beside (tools/bench/worst_frames.py:
bench_output/worst_frames/<case>_self_pen.png and <case>_contact_depth.png, listed in the markdown).

    .venv/bin/python tools/bench/run.py [--quick] [--cases N] [--no-scaling] [--no-memory] [--no-terrain] \
        [--no-windows] [--no-zoo] [--no-renders] [--threads 2] [--set NAME=VALUE] [--const core.MODULE.NAME=VALUE]
    .venv/bin/python tools/bench/run.py --partners-only      # only the partners section (tools/bench/bench_partners.py)

The partners section (several characters retargeted together, ReConForM §6.1: tools/bench/bench_partners.py) runs after
the single-pair table; ``--no-partners`` leaves it out.

Timings are wall-clock on whatever machine runs it; on a shared 2-core machine they are noisy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time
import tracemalloc

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from common import (ASSETS, CASES, MODULE, SCALING, Loader, _rss_kb, core, enable_addon, finish,  # noqa: E402
                    retarget, scaling_case, set_constants, setting_overrides, tile)


METRICS = ("jerk_mean", "jerk_max", "floor_pen_mean", "floor_pen_max", "self_pen_mean", "self_pen_max",
           "grounded_f1", "grounded_auc", "locked_f1", "locked_auc", "locked_strict_f1", "contact_f1",
           "hand_contact_held", "head_turn_mean", "head_turn_max")
#: a source with at least this share of its surface under the floor on average stands partly under its floor:
#: its grounded labels mark a sunk foot (reported next to the means, never removed from them)
SUNK_SOURCE = 0.01
#: source rows show the source's own value of these (the reference; F1/AUC are against the source itself)
SOURCE_METRICS = ("jerk_mean", "jerk_max", "floor_pen_mean", "floor_pen_max", "self_pen_mean", "self_pen_max")


def run_case(mods, src, smo, tgt, settings, log):
    # the source's labels are read above the floor the solve used (its own floor by default, "auto"; --set
    # source_ground=zero ...), for copy-rotations too, as the panel and the batch report do
    o = retarget(mods, src, smo, tgt, settings)
    return dict(init=o.reference, ours=o.metrics, t_cr=o.timings["copy_rotations_s"], t_solve=o.timings["solve_s"],
                stats=o.solver_stats, frames=smo.num_frames, feet=feet_readings(mods, o), outcome=o)


def feet_readings(mods, o) -> dict:
    """{(method, reading): metrics} of copy-rotations ('init') and ReConForM ('ours') with the source's feet read
    above z = 0 ('zero') and above its own floor ('own': ``core.contacts.ground.auto_ground``), 'floor': a line
    saying which floor that is (docs/metrics.md "Whose floor"), and 'series': {'init'|'ours': the per-frame mesh
    self-penetration and contact depth} (read with the own floor; neither depends on the floor), whose worst
    frames tools/bench/worst_frames.py renders."""
    import numpy as np
    metrics, ground, track_mod = (core(n) for n in ("metrics.scores", "contacts.ground", "character.track"))
    src, tgt, st = o.source, o.target, o.source_track
    own = ground.auto_ground(st)
    out = {"floor": (f"tracked, mean {100 * np.mean(own):+.1f} cm, range {100 * np.ptp(own):.1f} cm"
                     if np.ndim(own) else "z = 0")}
    for meth, motion in (("init", o.init_motion), ("ours", o.motion)):
        tt = track_mod.ClipTrack(tgt, motion)
        series = []
        for reading, g in (("zero", 0.0), ("own", own)):
            out[meth, reading] = metrics.evaluate(src, st.motion, tgt, motion, source_ground=g, source_track=st,
                                                  target_track=tt, series=series if reading == "own" else None)
        out.setdefault("series", {})[meth] = series[0]
    return out


def issue_targets(out, agg, targets: dict):
    """The feet under both readings of the source's floor, then issue 11's targets per case and over the cases
    (tools/bench/bench_targets.py: feet above the source's own floor), each also summed up in ``targets``."""
    import bench_targets as bt
    out()
    out("Feet under both readings of the source (docs/metrics.md \"Whose floor\"): grounded F1 / foot-locked F1 with "
        "the source's feet above z = 0 and above its own floor (`core.contacts.ground.auto_ground`; the targets below read "
        "the latter).")
    out()
    out("| case | the source's own floor | copy-rot, z = 0 | copy-rot, own floor | ReConForM, z = 0 | "
        "ReConForM, own floor |")
    out("|---|---|---|---|---|---|")
    for name, feet in zip(agg["cases"], agg["feet"]):
        cells = [f"{feet[m, r]['grounded_f1']:.3f} / {feet[m, r]['locked_f1']:.3f}" for m in ("init", "ours")
                 for r in ("zero", "own")]
        out(f"| {name} | {feet['floor']} | " + " | ".join(cells) + " |")
    out()
    out("Issue 11 targets per case (`tools/bench/bench_targets.py`; the source's feet above its own floor):")
    out()
    out("| case | target | measured | pass |")
    out("|---|---|---|---|")
    inits = [f["init", "own"] for f in agg["feet"]]
    ours = [f["ours", "own"] for f in agg["feet"]]
    per_target = bt.case_rows(out, [(name, i, o, hs, ht) for name, i, o, (hs, ht)
                                    in zip(agg["cases"], inits, ours, agg["heights"])])
    for label, measured, ok in bt.mean_targets(inits, ours):
        out(f"| mean over cases | {label} | {measured} | {'PASS' if ok else 'FAIL'} |")
        targets[label] = (measured, ok)
    for label, results in per_target.items():
        targets[label + " (every case)"] = bt.every_case(results)


def fmt(v, k):
    if v != v:  # NaN
        return "n/a"
    if k.startswith("jerk"):
        return f"{v:.1f}"
    if k.startswith("head"):
        return f"{v:.1f}°"
    if "pen" in k:
        return f"{100 * v:.3f}%"
    return f"{v:.3f}"


def memory_child(frames, threads, window=None, overrides=None, constants=(), trace=False):
    """Run in a child process: retarget a tiled clip of ``frames`` frames as the panel and the batch command do (10
    solver steps, then the metrics of the result and of copy-rotations, then the conflicts; with ``window`` =
    (frames, overlap): as overlapping windows, 10 steps each, no conflicts), print peak memory and the longest
    stretch without a progress step as JSON. ``overrides``: SolverSettings fields (``--set``); ``constants``:
    module constants (``--const``); ``trace``: also the Python heap's peak (``tracemalloc``, whose own bookkeeping
    added 136 MB to the peak RSS of a 10 000-frame retarget, docs/solver.md "Memory": off for the
    memory line)."""
    import torch
    torch.set_num_threads(threads)
    mods = enable_addon()
    set_constants(constants)
    mods, src, smo, tgt = scaling_case(frames, mods)
    base_rss = _rss_kb()
    # the peak so far is the characters' preparation (body fitting, key-vertex transfer): keep it apart from the
    # retarget's own peak (Linux resets VmHWM on writing 5 to clear_refs)
    setup_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        hwm = True
    except OSError:
        hwm = False
    if trace:
        tracemalloc.start()
    settings = mods["core.solver"].SolverSettings(**dict(overrides or {}, iterations=10, num_threads=threads))
    rt = mods["core.pipeline.retarget"]
    job = rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings))     # metrics and conflicts included
    if window:
        win = mods["core.pipeline.windows"]
        job = win.WindowedRetarget(src, smo, tgt, rt.RetargetOptions(settings=settings), win.WindowPlan(*window))
    t = last = time.perf_counter()
    gap = (0.0, "")
    phase_rss = {}              # the largest RSS seen at a step of each phase (MB)
    phase_peak, phase = {}, None   # the peak RSS from a phase's first step to the next phase's (MB; VmHWM reset)
    for step in job.steps():
        now = time.perf_counter()
        if now - last > gap[0]:
            gap = (now - last, step.message)
        last = now
        phase_rss[step.phase] = max(phase_rss.get(step.phase, 0.0), _rss_kb() / 1024)
        if hwm and step.phase != phase:
            if phase is not None:
                phase_peak[phase] = max(phase_peak.get(phase, 0.0), _rss_kb("VmHWM:") / 1024)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            phase = step.phase
    dt = time.perf_counter() - t
    if hwm and phase is not None:
        phase_peak[phase] = max(phase_peak.get(phase, 0.0), _rss_kb("VmHWM:") / 1024)
    peak_py = tracemalloc.get_traced_memory()[1] if trace else None
    # the whole process's (ru_maxrss counts from the last VmHWM reset only)
    peak_rss = max(setup_peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   1024 * max(phase_peak.values(), default=0.0))
    print("MEMORY " + json.dumps(dict(frames=frames, base_rss_mb=base_rss / 1024, peak_rss_mb=peak_rss / 1024,
                                      setup_peak_rss_mb=setup_peak / 1024,
                                      retarget_peak_rss_mb=max(phase_peak.values(), default=None),
                                      phase_peak_rss_mb={k: round(v) for k, v in phase_peak.items()},
                                      tracemalloc_peak_mb=None if peak_py is None else peak_py / 2 ** 20,
                                      seconds=dt,
                                      phases_s={k: round(v, 1) for k, v in job.outcome.timings.items()},
                                      longest_silence_s=gap[0], before=gap[1],
                                      phase_rss_mb={k: round(v) for k, v in phase_rss.items()})))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first two cases, short clips, no scaling/memory")
    ap.add_argument("--cases", type=int, default=None, help="run only the first N cases")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-terrain", action="store_true", help="skip the terrain cases (tools/bench/bench_terrain.py)")
    ap.add_argument("--no-zoo", action="store_true",
                    help="skip the morphology zoo (tools/bench/bench_zoo.py: self-contact clips onto generated bodies)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quality", default="balanced", choices=("fast", "balanced", "best"))
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable)")
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="a module constant of core for the whole run, e.g. core.solver.objective.SOLE_FLOOR_GAIN=1 "
                         "(repeatable; set in this process and in its memory child)")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--memory-window", type=int, nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--memory-trace", action="store_true",
                    help="with --memory-child: also trace the Python heap's peak (tracemalloc; raises the peak RSS)")
    ap.add_argument("--no-windows", action="store_true", help="skip the long-clip windows section (bench_windows.py)")
    ap.add_argument("--partners-only", action="store_true", help="only the partners section (bench_partners.py)")
    ap.add_argument("--no-partners", action="store_true", help="leave the partners section out")
    ap.add_argument("--no-renders", action="store_true",
                    help="no pictures of each case's worst frames (tools/bench/worst_frames.py); their table stays")
    ap.add_argument("--out", default=str(ROOT / "bench_output" / "bench.md"))
    args = ap.parse_args(argv)
    overrides = setting_overrides(args.set)
    if args.memory_child:
        memory_child(args.memory_child, args.threads, args.memory_window, overrides, args.const, args.memory_trace)
        return 0
    if args.partners_only:
        import bench_partners
        rest = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--partners-only"]
        return bench_partners.main(rest)
    if not (ASSETS / "characters").is_dir():
        print(f"error: shared assets not found at {ASSETS}", file=sys.stderr)
        return 1
    import torch
    torch.set_num_threads(args.threads)
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t_all = time.perf_counter()
    mods = enable_addon()
    set_constants(args.const)
    solver = mods["core.solver"]
    settings = solver.SolverSettings.preset(args.quality, num_threads=args.threads, **overrides)
    loader = Loader(mods, log)
    cases = CASES[:2] if args.quick else CASES
    if args.cases:
        cases = cases[:args.cases]
    out("# ReConForM benchmark")
    out()
    out(f"`{' '.join(['tools/bench/run.py'] + (argv if argv is not None else sys.argv[1:]))}` — torch "
        f"{torch.__version__}, {args.threads} threads, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; preset '{args.quality}' ({settings.iterations} iterations)"
        + (f", overrides {overrides}" if overrides else ""))
    out()
    out("Rows: `source` = the source clip's own values (the reference), then copy-rotations and ReConForM on the "
        "target. Definitions: docs/metrics.md; pen columns are area shares in %.")
    out()
    header = ["clip → target", "frames", "method"] + list(METRICS) + ["solver f/s", "end-to-end f/s"]
    out("| " + " | ".join(header) + " |")
    out("|" + "---|" * len(header))
    agg = {"init": {k: [] for k in METRICS}, "ours": {k: [] for k in METRICS}, "src_jerk": [], "ratio": [],
           "cases": [], "solver_fps": [], "ratio_h": [], "ratio_cr_h": [], "src_floor": [],
           "clamped": [], "feet": [], "heights": []}
    targets = {}
    import worst_frames
    worst_dir = pathlib.Path(args.out).resolve().parent / "worst_frames"
    worst_rows, worst_jobs = [], []
    for clip, target, first, count in cases:
        log(f"case {clip} -> {target}")
        src, smo, t_load_s = loader.source(clip, first, None if args.quick and count is None else count)
        if args.quick:
            smo = smo.slice(0, min(smo.num_frames, 150))
        _, tgt, t_load_t = loader.character(target)
        r = run_case(mods, src, smo, tgt, settings, log)
        T = r["frames"]
        solver_fps = T / r["t_solve"]
        e2e = T / (r["t_cr"] + r["t_solve"])
        name = f"{pathlib.Path(clip).stem} → {pathlib.Path(target).stem}"
        src_row = [name, str(T), "source"] + [fmt(r["ours"]["source_" + k], k) if k in SOURCE_METRICS else ""
                                               for k in METRICS] + ["", ""]
        out("| " + " | ".join(src_row) + " |")
        for meth in ("init", "ours"):
            m = r[meth]
            row = ["", str(T), "copy-rot" if meth == "init" else "ReConForM"]
            row += [fmt(m.get(k, float("nan")), k) for k in METRICS]
            row += ["", ""] if meth == "init" else [f"{solver_fps:.0f}", f"{e2e:.0f}"]
            out("| " + " | ".join(row) + " |")
            for k in METRICS:
                agg[meth][k].append(m.get(k, float("nan")))
        o = r.pop("outcome")
        worst = worst_frames.pick(r["feet"]["series"]["init"], r["feet"]["series"]["ours"])
        worst_rows.append((name, int(o.motion.frame_start), worst))
        if not args.no_renders:
            worst_jobs.append(worst_frames.job_item(name, ASSETS / target, o, worst, worst_dir, core))
        o = None
        agg["cases"].append(name)
        agg["feet"].append(r["feet"])
        agg["heights"].append((float(src.height), float(tgt.height)))
        agg["src_floor"].append(r["ours"]["source_floor_pen_mean"])
        agg["clamped"].append(r["ours"]["source_grounded_f1_clamped"])
        agg["solver_fps"].append(solver_fps)
        agg["src_jerk"].append(r["ours"]["source_jerk_mean"])
        agg["ratio"].append(r["ours"]["jerk_mean"] / max(r["ours"]["source_jerk_mean"], 1e-9))
        # jerk is a length / s³: a character 1.3x taller moving the same way has 1.3x the jerk
        agg["ratio_h"].append(agg["ratio"][-1] * float(src.height) / float(tgt.height))
        agg["ratio_cr_h"].append(r["init"]["jerk_mean"] / max(r["init"]["source_jerk_mean"], 1e-9)
                                 * float(src.height) / float(tgt.height))
        log(f"  solve {r['t_solve']:.2f} s ({solver_fps:.0f} f/s), source jerk {r['ours']['source_jerk_mean']:.1f}, "
            f"pairs {r['stats'].get('source_pair_entries')}")
    t_render = time.perf_counter()
    written, render_error = worst_frames.render(worst_jobs, worst_dir)
    if worst_jobs:
        log(f"  worst frames: {len(written)} pictures in {time.perf_counter() - t_render:.0f} s"
            + (f" ({render_error})" if render_error else ""))
    import numpy as np

    def mean(v):
        v = [x for x in v if x == x]
        return float(np.mean(v)) if v else float("nan")
    out()
    out("Means over cases (NaN entries skipped):")
    out()
    out("| method | " + " | ".join(METRICS) + " |")
    out("|---|" + "---|" * len(METRICS))
    for meth, label in (("init", "copy-rot"), ("ours", "ReConForM")):
        out(f"| {label} | " + " | ".join(fmt(mean(agg[meth][k]), k) for k in METRICS) + " |")
    fp_i, fp_o = mean(agg["init"]["floor_pen_mean"]), mean(agg["ours"]["floor_pen_mean"])
    out()
    out(f"- floor penetration (mean): {100 * (1 - fp_o / fp_i):.0f}% lower than copy-rotations"
        if fp_i > 0 else "- floor penetration: copy-rotations has none")
    out(f"- jerk (mean) / source jerk (mean): {mean(agg['ratio']):.2f} (per-case: "
        + ", ".join(f"{x:.2f}" for x in agg["ratio"]) + ")")
    out("- the same ratio per unit of height, (jerk / h_tgt) / (source jerk / h_src): ReConForM "
        + ", ".join(f"{x:.2f}" for x in agg["ratio_h"]) + "; copy-rot "
        + ", ".join(f"{x:.2f}" for x in agg["ratio_cr_h"]))
    gi, go = agg["init"], agg["ours"]
    sunk = [i for i, x in enumerate(agg["src_floor"]) if x >= SUNK_SOURCE]
    if sunk:   # read the foot F1 values knowing that the ground truth puts these sources' feet under the floor
        keep = [i for i in range(len(agg["cases"])) if i not in sunk]
        out(f"- sources standing under their floor (source floor_pen_mean ≥ {100 * SUNK_SOURCE:.0f} %): "
            + ", ".join(agg["cases"][i].split(" → ")[0] for i in sunk)
            + (f"; without them, ReConForM grounded F1 {mean([go['grounded_f1'][i] for i in keep]):.3f}, "
               f"foot-locked F1 {mean([go['locked_f1'][i] for i in keep]):.3f} (copy-rot "
               f"{mean([gi['grounded_f1'][i] for i in keep]):.3f}, {mean([gi['locked_f1'][i] for i in keep]):.3f})"
               if keep else ""))
    out("- grounded F1 of the source's own feet lifted to its floor where they sink under it "
        "(source_grounded_f1_clamped, docs/metrics.md: what a target copying the source's feet exactly but never "
        "under the floor would score): " + ", ".join(f"{x:.3f}" for x in agg["clamped"])
        + f"; mean {mean(agg['clamped']):.3f}")
    issue_targets(out, agg, targets)
    worst_frames.section(out, worst_rows, worst_dir, written, render_error,
                         base=pathlib.Path(args.out).resolve().parent)
    if not args.quick and not args.no_terrain:   # --- a flat walk onto stairs, a ramp, bumps ---
        from bench_terrain import bench_terrain
        rows = bench_terrain(lambda name: importlib.import_module(f"{MODULE}.{name}"), loader, settings, out=out,
                             log=log)
        targets["terrain: floor penetration lower than copy-rot on every ground (mean over frames)"] = (
            ", ".join(f"{100 * b['floor_pen_mean']:.2f} % vs {100 * a['floor_pen_mean']:.1f} %" for a, b, *_ in rows),
            all(b["floor_pen_mean"] < a["floor_pen_mean"] for a, b, *_ in rows))
        targets["terrain: grounded-feet F1 higher than copy-rot on every ground"] = (
            ", ".join(f"{b['grounded_f1']:.3f} vs {a['grounded_f1']:.3f}" for a, b, *_ in rows),
            all(b["grounded_f1"] > a["grounded_f1"] for a, b, *_ in rows))
    if not args.quick and not args.no_zoo:       # --- self-contact clips onto generated bodies of extreme shapes ---
        import bench_zoo
        targets.update(bench_zoo.section(out, log, mods, loader, settings,
                                         render_dir=None if args.no_renders else worst_dir))
    metrics_ratios = []   # (frames, metrics s, solve s): the scaling lengths, then the memory line's 10 000 frames
    if not args.quick and not args.no_scaling:
        src, smo, _ = loader.source(SCALING[0])
        _, tgt, _ = loader.character(SCALING[1])
        parts = []
        at_1000 = None
        for n in SCALING[2]:
            mo = tile(mods["core.types"].Motion, smo, n)
            t = time.perf_counter()
            done = retarget(mods, src, mo, tgt, settings)       # its metrics timed apart (metrics_ratios)
            res = done.motion
            dt = time.perf_counter() - t - done.timings["metrics_s"]
            metrics_ratios.append((f"{n}", done.timings["metrics_s"], done.timings["solve_s"]))
            parts.append(f"{n}: {n / dt:.0f} f/s ({dt:.1f} s)")
            if n == 1000:
                targets["solver ≥ 100 frames/s on a 1000-frame clip (incl. set-up)"] = (f"{n / dt:.0f} f/s",
                                                                                       n / dt >= 100)
                at_1000 = (mo, res)
            log(f"  scaling {n}: {n / dt:.0f} f/s")
        out()
        out(f"Scaling (retarget frames/s incl. copy-rotations and solver set-up, its metrics timed apart, "
            f"{pathlib.Path(SCALING[0]).stem} ping-pong tiled → "
            f"{pathlib.Path(SCALING[1]).stem}): " + "; ".join(parts))
        out()                            # --- the same case with the pose map compiled (tools/bench/bench_compile.py) ---
        import bench_compile
        targets.update(bench_compile.section(out, lambda *a: retarget(mods, *a, metrics=False),
                                             lambda m, n: tile(mods["core.types"].Motion, m, n), src, smo, tgt,
                                             settings, log=log))
        out()                            # --- the same case on CUDA, when torch sees one (tools/bench/bench_gpu.py) ---
        import bench_gpu
        targets.update(bench_gpu.section(out, mods["core.pipeline.retarget"], lambda m, n: tile(mods["core.types"].Motion, m, n),
                                         src, smo, tgt, settings,
                                         cpu_results={} if at_1000 is None else {1000: at_1000[1]}, log=log))
    if not args.quick and not args.no_memory:
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--memory-child", "10000",
               "--threads", str(args.threads)] + [f"--set={kv}" for kv in args.set] + \
            [f"--const={kv}" for kv in args.const]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        mem = [l for l in proc.stdout.splitlines() if l.startswith("MEMORY ")]
        out()
        if mem:
            d = json.loads(mem[0][7:])
            out(f"Memory, 10 000-frame retarget (child process, 10 solver steps, then the metrics and the conflicts "
                f"as the panel and the batch run them): peak RSS {d['peak_rss_mb']:.0f} MB (RSS before the "
                f"retarget {d['base_rss_mb']:.0f} MB, incl. Blender/torch; no tracemalloc); {d['seconds']:.0f} s "
                f"in all ({d['phases_s']}); longest "
                f"stretch without a progress step {d['longest_silence_s']:.1f} s (before '{d['before']}')")
            targets["memory < 2 GB for 10 000 frames (peak RSS)"] = (f"{d['peak_rss_mb']:.0f} MB",
                                                                     d["peak_rss_mb"] < 2048)
            targets["progress at least every 10 s on 10 000 frames (2 threads)"] = (
                f"{d['longest_silence_s']:.1f} s", d["longest_silence_s"] <= 10.0)
            targets["longest silent stretch < 2 s (10 000-frame retarget, every phase)"] = (
                f"{d['longest_silence_s']:.1f} s before '{d['before']}'", d["longest_silence_s"] < 2.0)
            metrics_ratios.append(("10000 (10 steps)", d["phases_s"]["metrics_s"], d["phases_s"]["solve_s"]))
        else:
            out("Memory measurement failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
    if metrics_ratios:    # the metrics of the result and of copy-rotations against the solve, per length
        targets["metrics ≤ 25 % of the solve (scaling lengths, 10 000 frames)"] = (
            ", ".join(f"{n}: {100 * m / s:.0f} % ({m:.1f} s / {s:.1f} s)" for n, m, s in metrics_ratios),
            all(m <= 0.25 * s for _, m, s in metrics_ratios))
    # --- an artist's loop: first solve, re-solve, a window (tools/bench/bench_artist.py) ---
    if not args.quick and not args.no_scaling:
        import bench_artist
        targets.update(bench_artist.section(out, mods, loader, args.threads))
    # --- long clips in windows (tools/bench/bench_windows.py) ---
    if not args.quick and not args.no_windows:
        import bench_windows
        w_args = argparse.Namespace(frames=1000, window=300, overlap=60, threads=args.threads,
                                    memory=[] if args.no_memory else [3000, 10000])
        targets.update(bench_windows.section(out, log, mods, loader, settings, w_args, SCALING))
    # --- key-vertex transfer speed (tools/bench/bench_keyverts.py) ---
    from bench_keyverts import bench_keyverts
    bench_keyverts(lambda name: importlib.import_module(f"{MODULE}.{name}"), out=out)
    # --- characters retargeted together (tools/bench/bench_partners.py) ---
    if not args.no_partners:
        import bench_partners
        out()
        p_args = bench_partners.parse([] + (["--quick"] if args.quick else []) + [f"--set={kv}" for kv in args.set]
                                      + ["--quality", args.quality])      # the constants are set in this process
        for label, res in bench_partners.section(out, log, p_args, bench_partners.modules(mods)).items():
            targets["partners: " + label] = res
    out()
    out(f"Load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[2]:.1f} (15 min) on "
        f"{os.cpu_count()} CPUs (other processes share them: timings are noisy).")
    out()
    out("Targets (docs/solver.md):")
    out()
    finish(out, lines, targets, args.out, f"Total bench time {time.perf_counter() - t_all:.0f} s.")
    return 0


if __name__ == "__main__":
    import extension                                    # on sys.path through common
    extension.exit_after(main)
