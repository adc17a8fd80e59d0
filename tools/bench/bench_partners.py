"""`make bench`, partners section: characters retargeted together (ReConForM §6.1) on the salsa pairs of
../shared/assets (lead and follow captured together), onto partners of contrasting sizes.

    .venv/bin/python tools/bench/bench_partners.py [--quick] [--cases N] [--no-timing] [--set w_partner=3] [--threads 1]
    .venv/bin/python tools/bench/run.py --partners-only          # the same, as a section of make bench

Per case, three methods on the same start (copy-rotations placed together, ``core.pipeline.placement.place_together``):
copy-rotations itself; each character solved alone (``core.pipeline.retarget.Retarget`` from that start); the joint
solve (``core.pipeline.group.RetargetGroup``). Rows: the partner metrics (docs/metrics.md "Partners") and the
mean over the two targets of their own metrics. Then timing, interleaved in one process: K characters solved
jointly vs the same K solved separately (K = 2: a salsa couple; K = 5: two couples and a solo dancer side by
side), wall clock and process CPU time, medians; frames/s and peak memory of the joint solve in a child
process per K.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import common  # noqa: E402  (the bench's loader and the add-on's modules)

#: (label, lead clip, follow clip, lead's target, follow's target)
CASES = [
    ("salsa 01", "motions/cmu_salsa_60_01_lead.bvh", "motions/cmu_salsa_61_01_follow.bvh",
     "characters/mh_male_average.glb", "characters/mh_female_curvy_mixamorig.glb"),
    ("salsa 05", "motions/cmu_salsa_60_05_lead.bvh", "motions/cmu_salsa_61_05_follow.bvh",
     "characters/mh_male_muscular.glb", "characters/mh_teen_girl.glb"),
    ("salsa 15", "motions/cmu_salsa_60_15_lead.bvh", "motions/cmu_salsa_61_15_follow.bvh",
     "characters/mh_male_heavy.glb", "characters/mh_female_thin_tall.glb"),
]
#: clip frames used (indices): skip the first second, then 6 s at 120 fps
FIRST, FRAMES = 120, 720
#: five characters for the timing: two couples and a solo dancer, (clip, target, x shift in metres)
FIVE = [(CASES[2][1], CASES[2][3], 0.0), (CASES[2][2], CASES[2][4], 0.0),
        (CASES[1][1], CASES[1][3], 3.0), (CASES[1][2], CASES[1][4], 3.0),
        (CASES[0][1], "characters/mh_female_average.glb", -3.0)]
PARTNER = ("partner_contact_f1", "hand_partner_error_mean", "partner_pen_mean", "gaze_angle_error_mean")
OWN = ("contact_f1", "grounded_f1", "locked_f1", "floor_pen_mean", "self_pen_mean", "jerk_mean", "head_turn_mean",
       "head_turn_max")


def fmt(v, k):
    if v is None or v != v:
        return "n/a"
    if "pen" in k:
        return f"{100 * v:.3f}%"
    if k.startswith("jerk"):
        return f"{v:.0f}"
    if "error" in k and "gaze" not in k:
        return f"{100 * v:.2f}% h"
    if "gaze" in k or k.startswith("head"):
        return f"{v:.1f}°"
    return f"{v:.3f}"


def shifted(mods, character, dx):
    """The character moved ``dx`` metres along world X (its armature object's matrix)."""
    if not dx:
        return character
    M = character.skeleton.object_matrix.copy()
    M[0, 3] += dx
    return dataclasses.replace(character, skeleton=dataclasses.replace(character.skeleton, object_matrix=M))


def load_pairs(loader, spec, first, frames):
    """[(source Character, Motion, target Character)] of a list of (clip, target, dx)."""
    out = []
    for clip, target, dx in spec:
        src, mo, _ = loader.source(clip, first, frames)
        _, tgt, _ = loader.character(target)
        out.append((shifted(None, src, dx), mo, tgt))
    return out


def mean(vals):
    vals = [v for v in vals if v is not None and v == v]
    return sum(vals) / len(vals) if vals else float("nan")


def run_case(mods, pairs, settings):
    """{'copy'|'alone'|'joint': {'partner': dict, 'own': [dict per target]}}, and the joint solve's statistics."""
    rt, grp = mods["core.pipeline.retarget"], mods["core.pipeline.group"]
    mp = mods["core.metrics.partners"]
    opts = rt.RetargetOptions(settings=settings, conflicts=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    tracks = [m.source_track for m in joint.members]
    alone = []
    for (src, mo, tgt), member, tr in zip(pairs, joint.members, tracks):
        alone.append(rt.run(rt.Retarget(src, mo, tgt, dataclasses.replace(opts, init_motion=member.init_motion,
                                                                            baseline_metrics=False),
                                         source_track=tr)))
    targets = [m.target for m in joint.members]
    return {
        "copy": {"partner": joint.partner_reference, "own": [m.reference for m in joint.members]},
        "alone": {"partner": mp.evaluate_partners(tracks, list(zip(targets, [a.motion for a in alone]))),
                  "own": [a.metrics for a in alone]},
        "joint": {"partner": joint.partner_metrics, "own": [m.metrics for m in joint.members]},
    }, joint.solver_stats


def timing(mods, pairs, settings, repeats, log):
    """Joint vs separate solves of ``pairs``, interleaved: run r solves separately then jointly (even r) or the
    other way round (odd r), so a load that drifts weighs on both alike. Returns the medians of wall clock and
    process CPU time, the per-run CPU ratios (joint / separate of the same r) with their median (the robust
    figure: each ratio compares two runs a few seconds apart), and the 1-minute load average at every run."""
    solver = mods["core.solver"]
    cr = mods["core.pipeline.copy_rotations"]
    tracks = [mods["core.character.track"].ClipTrack(s, m) for s, m, _ in pairs]
    inits = cr.place_together([(s, m, tr, t, cr.copy_rotations(s, m, t, tr)) for (s, m, t), tr in zip(pairs, tracks)])
    sep_w, sep_c, joi_w, joi_c, loads = [], [], [], [], []
    for r in range(repeats):
        for kind in (("sep", "joint") if r % 2 == 0 else ("joint", "sep")):
            loads.append(os.getloadavg()[0])
            w0, c0 = time.perf_counter(), time.process_time()
            jobs = [solver.SolveJob(s, m, t, i, settings, source_track=tr)
                    for (s, m, t), i, tr in zip(pairs, inits, tracks)]
            if kind == "sep":
                for j in jobs:
                    j.run()
            else:
                solver.GroupSolveJob(jobs, settings).run()
            w, c = time.perf_counter() - w0, time.process_time() - c0
            (sep_w if kind == "sep" else joi_w).append(w)
            (sep_c if kind == "sep" else joi_c).append(c)
            log(f"  timing K={len(pairs)} {kind}: {w:.1f} s wall, {c:.1f} s CPU, load {loads[-1]:.1f}")
    med = statistics.median
    ratios = [j / s for j, s in zip(joi_c, sep_c)]
    return dict(sep_wall=med(sep_w), joint_wall=med(joi_w), sep_cpu=med(sep_c), joint_cpu=med(joi_c),
                ratio_wall=med(joi_w) / med(sep_w), ratio_cpu=med(ratios), ratios_cpu=ratios,
                load=(min(loads), max(loads)))


def memory_child(k, frames, iterations, threads):
    """In a child process: the joint solve of the first ``k`` of FIVE; prints frames/s and peak RSS as JSON."""
    import torch
    torch.set_num_threads(threads)
    mods = modules()
    loader = common.Loader(mods, lambda s: None)
    pairs = load_pairs(loader, FIVE[:k], FIRST, frames)
    cr, solver = mods["core.pipeline.copy_rotations"], mods["core.solver"]
    tracks = [mods["core.character.track"].ClipTrack(s, m) for s, m, _ in pairs]
    inits = cr.place_together([(s, m, tr, t, cr.copy_rotations(s, m, t, tr)) for (s, m, t), tr in zip(pairs, tracks)])
    base = common._rss_kb()
    peak = [base]
    done = threading.Event()

    def sample():            # the solve's own peak: RSS sampled every 5 ms (ru_maxrss keeps the import's)
        while not done.is_set():
            peak[0] = max(peak[0], common._rss_kb())
            done.wait(0.005)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    settings = solver.SolverSettings(iterations=iterations, num_threads=threads)
    t = time.perf_counter()
    job = solver.GroupSolveJob([solver.SolveJob(s, m, tt, i, settings, source_track=tr)
                                for (s, m, tt), i, tr in zip(pairs, inits, tracks)], settings)
    job.run()
    dt = time.perf_counter() - t
    done.set()
    sampler.join()
    print("MEMORY " + json.dumps(dict(k=k, frames=frames, seconds=dt, frames_per_s=frames / dt,
                                      rss_before_mb=base / 1024, peak_rss_mb=peak[0] / 1024,
                                      process_peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                      partner_entries=job.stats.get("partner_entries_last"))))


def modules(mods=None):
    """The add-on's modules this section uses (``mods``: those of a bench that already enabled it)."""
    mods = dict(mods) if mods is not None else common.enable_addon()
    for name in ("core.pipeline.group", "core.metrics.partners", "core.pipeline.copy_rotations", "core.character.track"):
        mods[name] = common.importlib.import_module(f"{common.MODULE}.{name}")
    return mods


def section(out, log, args, mods=None):
    """Write the partners section through ``out`` (one line per call); returns {target: (value, pass)}."""
    import torch
    torch.set_num_threads(args.threads)
    mods = mods or modules()
    overrides = common.setting_overrides(args.set)
    settings = mods["core.solver"].SolverSettings.preset(args.quality, num_threads=args.threads, **overrides)
    loader = common.Loader(mods, log)
    frames = 150 if args.quick else FRAMES
    cases = CASES if args.cases is None else CASES[:args.cases]
    targets = {}
    out("## Partners: characters retargeted together (ReConForM §6.1)")
    out()
    out(f"Salsa pairs (lead and follow captured together), clip frames {FIRST}–{FIRST + frames - 1} at 120 fps; "
        f"preset '{args.quality}' ({settings.iterations} iterations), {args.threads} thread(s)"
        + (f", overrides {overrides}" if overrides else "") + ". Rows: copy-rotations placed together "
        "(the common start), each character solved alone from it, the joint solve. Partner columns: "
        "docs/metrics.md \"Partners\"; own columns: mean over the two targets of docs/metrics.md's metrics.")
    out()
    header = ["case", "method"] + list(PARTNER) + [f"own {k}" for k in OWN]
    out("| " + " | ".join(header) + " |")
    out("|" + "---|" * len(header))
    agg = {m: {k: [] for k in PARTNER + OWN} for m in ("copy", "alone", "joint", "source")}
    locked = []              # per target: what its foot-locked F1 is an F1 of (the source's locked foot-frames)
    for label, lead, follow, t_lead, t_follow in cases:
        log(f"partners: {label}")
        pairs = load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], FIRST, frames)
        res, stats = run_case(mods, pairs, settings)
        name = f"{label}: {pathlib.Path(t_lead).stem} & {pathlib.Path(t_follow).stem}"
        for meth, title in (("copy", "copy-rot"), ("alone", "alone"), ("joint", "joint")):
            r = res[meth]
            row = [name if meth == "copy" else "", title] + [fmt(r["partner"][k], k) for k in PARTNER]
            row += [fmt(mean([o[k] for o in r["own"]]), k) for k in OWN]
            out("| " + " | ".join(row) + " |")
            for k in PARTNER:
                agg[meth][k].append(r["partner"][k])
            for k in OWN:
                agg[meth][k].append(mean([o[k] for o in r["own"]]))
        # the source couple's own penetration between the characters (a hand holding a hand overlaps the
        # partner's hand capsule in the capture too): what a joint solve that restores the holds comes back to
        src_pen = res["joint"]["partner"].get("source_partner_pen_mean")
        agg["source"]["partner_pen_mean"].append(src_pen)
        out("| | source | | | " + fmt(src_pen, "partner_pen_mean") + " |" + " |" * (len(PARTNER) - 3 + len(OWN)))
        for role, a, jt in zip(("lead", "follow"), res["alone"]["own"], res["joint"]["own"]):
            n = round(a["source_locked_share"] * 2 * a["frames"])    # both feet pooled
            locked.append(f"{label} {role} {a['locked_f1']:.3f} → {jt['locked_f1']:.3f} ({n})")
        log(f"  joint: {stats.get('partner_source_entries')} source partner entries, "
            f"{stats.get('gaze_source_entries')} source gaze entries, solve {stats.get('solve_s', 0):.1f} s")
    out()
    out("Means over the cases:")
    out()
    out("| method | " + " | ".join(PARTNER + tuple(f"own {k}" for k in OWN)) + " |")
    out("|---|" + "---|" * (len(PARTNER) + len(OWN)))
    for meth, title in (("copy", "copy-rot"), ("alone", "alone"), ("joint", "joint")):
        out(f"| {title} | " + " | ".join(fmt(mean(agg[meth][k]), k) for k in PARTNER + OWN) + " |")
    out("| source | | | " + fmt(mean(agg["source"]["partner_pen_mean"]), "partner_pen_mean") + " |"
        + " |" * (len(PARTNER) - 3 + len(OWN)))
    out()
    out("Own foot-locked F1 per target, alone → joint (the source's locked foot-frames of the two feet, out of "
        f"2 × {frames}: an F1 over a few of them moves by a frame): " + "; ".join(locked) + ".")
    j, a, c = agg["joint"], agg["alone"], agg["copy"]
    f1 = [(jj, max(aa, cc)) for jj, aa, cc in zip(j["partner_contact_f1"], a["partner_contact_f1"],
                                                   c["partner_contact_f1"])]
    targets["partner contact F1: joint > both others (every case)"] = (
        ", ".join(f"{x:.3f} vs {y:.3f}" for x, y in f1), all(x > y for x, y in f1))
    err = [(jj, min(aa, cc)) for jj, aa, cc in zip(j["hand_partner_error_mean"], a["hand_partner_error_mean"],
                                                    c["hand_partner_error_mean"])]
    targets["hand-partner distance error: joint < both others (every case)"] = (
        ", ".join(f"{100 * x:.1f} vs {100 * y:.1f} % h" for x, y in err), all(x < y for x, y in err))
    pen = mean(j["partner_pen_mean"]), mean(a["partner_pen_mean"])
    targets["penetration between characters: joint ≤ alone + 0.1 % (mean)"] = (
        f"{100 * pen[0]:.3f} % vs {100 * pen[1]:.3f} %", pen[0] <= pen[1] + 0.001)
    src = mean(agg["source"]["partner_pen_mean"])
    targets["penetration between characters: joint ≤ the source couple's + 0.1 % (mean)"] = (
        f"{100 * pen[0]:.3f} % vs {100 * src:.3f} %", pen[0] <= src + 0.001)
    for k, tol, lower in (("contact_f1", 0.03, False), ("grounded_f1", 0.03, False), ("locked_f1", 0.03, False),
                          ("floor_pen_mean", 0.001, True), ("self_pen_mean", 0.001, True)):
        x, y = mean(j[k]), mean(a[k])
        ok = x <= y + tol if lower else x >= y - tol
        targets[f"own {k}: joint within noise of alone ({'+' if lower else '−'}{tol:g})"] = (
            f"{fmt(x, k)} vs {fmt(y, k)}", ok)
    jr = mean(j["jerk_mean"]) / mean(a["jerk_mean"])
    targets["own jerk_mean: joint ≤ 1.05 × alone"] = (f"{jr:.3f}", jr <= 1.05)
    if not cases:            # --cases 0: the timing only
        targets = {}
    if not args.no_timing:
        out()
        repeats = 2 if args.quick else args.repeats
        t_frames = 150 if args.quick else 600
        t_settings = dataclasses.replace(settings, iterations=30 if args.quick else settings.iterations)
        for k, limit in ((2, 1.1), (5, 1.2)):
            pairs = load_pairs(loader, FIVE[:k], FIRST, t_frames)
            t = timing(mods, pairs, t_settings, repeats, log)
            out(f"Timing, K = {k} ({t_frames} frames, {t_settings.iterations} iterations, {repeats} runs of each, "
                f"interleaved, medians): separate solves {t['sep_wall']:.1f} s wall / {t['sep_cpu']:.1f} s CPU, "
                f"joint {t['joint_wall']:.1f} s / {t['joint_cpu']:.1f} s: joint / separate = "
                f"{t['ratio_wall']:.3f} (wall, ratio of medians), {t['ratio_cpu']:.3f} (CPU, median of the per-run "
                "ratios " + ", ".join(f"{x:.3f}" for x in t["ratios_cpu"])
                + f"); load average {t['load'][0]:.1f}–{t['load'][1]:.1f} (1 min) during the runs")
            out()
            targets[f"K = {k} joint ≤ {limit} × separate (CPU time, median of per-run ratios)"] = (f"{t['ratio_cpu']:.3f}",
                                                                                 t["ratio_cpu"] <= limit)
            cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--memory-child", str(k), "--frames",
                   str(t_frames), "--iterations", str(t_settings.iterations), "--threads", str(args.threads)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            mem = [ln for ln in proc.stdout.splitlines() if ln.startswith("MEMORY ")]
            if mem:
                d = json.loads(mem[0][7:])
                out(f"K = {k} joint solve in a child process: {d['frames_per_s']:.1f} frames/s ({d['seconds']:.1f} s "
                    f"incl. set-up), peak RSS during the solve {d['peak_rss_mb']:.0f} MB, "
                    f"{d['peak_rss_mb'] - d['rss_before_mb']:.0f} MB above the RSS before it "
                    f"({d['rss_before_mb']:.0f} MB: Blender, torch and the imported characters), "
                    f"{d['partner_entries']} partner entries at the last step")
            else:
                out(f"K = {k} memory measurement failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
            out()
    out()
    out(f"Load average at the end: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} CPUs.")
    return targets


def parse(argv=None):
    """The command line of this section (``main``'s, and ``tools/bench/run.py``'s call of ``section``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="150 frames, 2 timing runs of 30 iterations")
    ap.add_argument("--cases", type=int, default=None, help="run only the first N cases (0: the timing only)")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--repeats", type=int, default=5, help="timing runs of each kind (interleaved)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quality", default="balanced", choices=("fast", "balanced", "best"))
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable)")
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="a module constant for the run, e.g. core.solver.group.PARTNER_STEP=0.75 (repeatable; the "
                         "timing's memory children run without it)")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--frames", type=int, default=600, help=argparse.SUPPRESS)
    ap.add_argument("--iterations", type=int, default=120, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench_output" / "bench_partners.md"))
    return ap.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.memory_child:
        memory_child(args.memory_child, args.frames, args.iterations, args.threads)
        return 0
    if not (common.ASSETS / "characters").is_dir():
        print(f"error: shared assets not found at {common.ASSETS}", file=sys.stderr)
        return 1
    mods = None
    if args.const:
        mods = modules()                  # the add-on enabled first: the constants are its modules'
        common.set_constants(args.const)
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    out("# ReConForM benchmark: partners")
    out()
    out(f"`{' '.join(['tools/bench/bench_partners.py'] + (argv if argv is not None else sys.argv[1:]))}`")
    out()
    targets = section(out, log, args, mods)
    out()
    common.finish(out, lines, targets, args.out, f"Total {time.perf_counter() - t0:.0f} s.")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
