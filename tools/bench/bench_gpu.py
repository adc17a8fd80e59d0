"""`make bench`'s GPU lines (issue 16 item 4): the scaling case retargeted on CUDA at 75, 1 000 and 10 000 frames.

For each length: frames/s of the whole retarget (copy-rotations, set-up and solve, no metrics) and of the solve
alone, reproducible (the default: torch's deterministic algorithms), with the pose map not recorded as a CUDA graph
(``core.solver.graphed.CUDA_GRAPH`` False: the speed-up measured back to back, and whether the two results are
identical) and not reproducible (``core.solver.optim.DETERMINISTIC`` False), peak GPU memory (with and without the
graph); where the CPU ran the same clip in the same process, the bone rotations' angles from the CPU result (the same
solve: same settings, same seed; only the arithmetic's order differs) beside how far rounding alone moves this solve on
the CPU (its float32 result against float64, ``core.solver.job.DTYPE``, and against the clip's inputs nudged by one
rounding); and whether the reproducible GPU solve run twice gives identical results. A CUDA device is never needed:
without one the section says so and measures nothing.

A GPU machine often has no Blender. The characters are then prepared here, where the bpy wheel imports the assets,
and carried over as a pickle; the GPU machine needs torch and numpy only (POT too where it is installed: without
it a stand-in refuses any key-vertex transfer, which a prepared case never runs):

    .venv/bin/python tools/bench/bench_gpu.py --save-case case.pkl          # here (bpy): the scaling case, prepared
    python3 tools/bench/bench_gpu.py --case case.pkl [--frames 75,1000,10000] [--cpu-frames 75,1000] [--threads 16]

``make bench`` runs ``section`` on its own prepared characters (the CPU results of its scaling line reused).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import pathlib
import pickle
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRAMES = (75, 1000, 10000)
#: the CPU runs the same clip at these lengths to compare rotations (10 000 frames on a CPU take minutes)
CPU_FRAMES = (75, 1000)
#: "the same result" on the GPU as on the CPU, as bone-rotation angles between the two results over every frame and
#: bone (degrees): (largest, 99.9th percentile, mean). Both run the same float32 solve; the GPU sums in another
#: order, and Adam's normalised steps carry such rounding through the whole clip's optimisation. The scale is the
#: solve's own sensitivity to rounding, measured on the CPU on the same clip: its float32 result against its float64
#: result, and against float32 results from the clip's inputs nudged by NUDGE (relative, about one float32 rounding;
#: NUDGE_SAMPLES seeds), the largest of these per statistic; this section prints both columns. A GPU result as
#: accurate as the CPU's float32 one is within twice that of it (the triangle inequality through another rounding of
#: the solve), so the allowed angles are the larger of TOLERANCE_DEG and ROUNDING_FACTOR × that scale, per length
#: (docs/solver.md "GPU")
TOLERANCE_DEG = (2.0, 0.5, 0.01)
ROUNDING_FACTOR = 2.0
NUDGE = 1e-7
NUDGE_SAMPLES = 4
#: frames/s the issue aims for on a data-centre GPU at 1 000+ frames
TARGET_FPS = 1000.0


def angles_deg(a, b):
    """(T, J) angle in degrees between two (T, J, 4) WXYZ unit-quaternion arrays (q and -q are one rotation)."""
    import numpy as np
    dots = np.abs((np.asarray(a, np.float64) * np.asarray(b, np.float64)).sum(-1)).clip(0.0, 1.0)
    return np.degrees(2.0 * np.arccos(dots))


def spread(a, b):
    """(largest, 99.9th percentile, mean) angle in degrees between two (T, J, 4) rotation arrays."""
    import numpy as np
    ang = angles_deg(a, b)
    return float(ang.max()), float(np.percentile(ang, 99.9)), float(ang.mean())


def _identical(a, b) -> bool:
    """Whether two Motions have the same rotations and locations, bit for bit."""
    return bool((a.rotations == b.rotations).all() and (a.locations == b.locations).all())


def allowed(rounding) -> tuple:
    """The angles (largest, 99.9th percentile, mean) a GPU result may differ from the CPU's by, given the solve's own
    rounding spread ``rounding`` on the same clip (``rounding_scale``; None: not measured)."""
    return tuple(max(t, ROUNDING_FACTOR * (f if rounding else 0.0))
                 for t, f in zip(TOLERANCE_DEG, rounding or (0.0,) * 3))


def nudged(motion, seed: int):
    """``motion`` with its rotations and locations each multiplied by (1 + NUDGE · a standard normal draw, seeded): the
    same clip up to about one float32 rounding of its inputs."""
    import numpy as np
    rng = np.random.default_rng(seed)
    bump = lambda a: (a * (1.0 + NUDGE * rng.standard_normal(a.shape))).astype(a.dtype)
    return type(motion)(bump(motion.rotations), bump(motion.locations), motion.fps, motion.frame_start)


def rounding_scale(spreads) -> tuple:
    """The largest of several (largest, 99.9th percentile, mean) spreads, statistic by statistic."""
    return tuple(max(s[i] for s in spreads) for i in range(3))


def _fmt(x):
    return "n/a" if x is None else f"{x[0]:.3f}° / {x[1]:.3f}° / {x[2]:.4f}°"


def _retarget(rt, src, motion, tgt, settings):
    """core.pipeline.retarget's one path (as the panel and the batch command run it), no metrics, no conflicts."""
    return rt.run(rt.Retarget(src, motion, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                   conflicts=False)))


def _timed(rt, src, clip, tgt, settings, cuda):
    """(Outcome, seconds, peak GPU MB or None) of one retarget."""
    import torch
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    res = _retarget(rt, src, clip, tgt, settings)
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t
    return res, dt, (torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None)


def _core(rt, module: str):
    """The module ``core.<module>`` of the package ``rt`` (core.pipeline.retarget) belongs to."""
    return importlib.import_module(rt.__name__.rsplit(".pipeline.", 1)[0] + "." + module)


@contextlib.contextmanager
def constant(rt, name: str, value):
    """The module constant ``solver.MODULE.NAME`` (``name``) of the package ``rt`` belongs to at ``value`` for the
    block, restored after."""
    module, _, attr = name.rpartition(".")
    mod = _core(rt, module)
    was = getattr(mod, attr)
    setattr(mod, attr, value)
    try:
        yield
    finally:
        setattr(mod, attr, was)


def _timed_eager(rt, src, clip, tgt, settings, cuda):
    """``_timed`` with the pose map not recorded as a CUDA graph (``core.solver.graphed.CUDA_GRAPH`` False)."""
    with constant(rt, "solver.graphed.CUDA_GRAPH", False):
        return _timed(rt, src, clip, tgt, settings, cuda)


def section(out, rt, tile, src, smo, tgt, settings, frames=FRAMES, cpu_frames=CPU_FRAMES, cpu_results=None,
            device: str = "cuda", log=lambda s: None) -> dict:
    """Print the GPU lines through ``out``; return {target label: (measured text, passed)}.

    ``rt``: the core.pipeline.retarget module; ``tile(motion, n)``: the clip repeated to n frames; ``cpu_results``: {n:
    Outcome.motion} already solved on the CPU with ``settings`` (the rest of ``cpu_frames`` is solved here, and the
    same clips in float64 on the CPU). ``device``: "cuda" (a test passes "cpu" to run the comparisons anywhere)."""
    import torch
    if device.startswith("cuda") and not torch.cuda.is_available():
        out(f"GPU: not measured (torch {torch.__version__} sees no CUDA device on this machine; the solver never "
            "needs one).")
        return {}
    cuda = device.startswith("cuda")
    name = torch.cuda.get_device_name(0) if cuda else platform.processor() or "CPU"
    repro = dataclasses.replace(settings, device=device)
    cpu_results = dict(cpu_results or {})
    # an untimed warm-up: creates the CUDA context and loads the kernels
    _retarget(rt, src, tile(smo, min(75, max(frames))), tgt, dataclasses.replace(repro, iterations=2))
    out(f"GPU ({name}, torch {torch.__version__}, CUDA {torch.version.cuda}; {settings.iterations} steps, "
        f"{_core(rt, 'solver.job').DTYPE}; times after an untimed warm-up; CPU runs with {torch.get_num_threads()} "
        "threads in the same process). Rotation differences: largest / 99.9th percentile / mean angle over every frame "
        "and bone.")
    out()
    out("| frames | GPU f/s, reproducible (s) | GPU solve alone f/s | GPU f/s, pose not graphed (s) | graphed = not "
        "graphed | GPU f/s, not reproducible (s) | peak GPU memory | CPU f/s (s) | GPU vs CPU | CPU float32 vs float64 "
        f"| CPU vs inputs nudged {NUDGE:g} (largest of {NUDGE_SAMPLES}) | GPU run twice |")
    out("|---|---|---|---|---|---|---|---|---|---|---|---|")
    targets, checked, twice, graphed_same = {}, [], [], []
    for n in frames:
        clip = tile(smo, n)
        cpu_txt, f64, nudge = "not run", None, None
        if n in cpu_frames:
            if n not in cpu_results:
                res, dt, _ = _timed(rt, src, clip, tgt, settings, False)
                cpu_results[n] = res.motion
                cpu_txt = f"{n / dt:.0f} ({dt:.1f} s)"
            with constant(rt, "solver.job.DTYPE", "float64"):
                r64 = _retarget(rt, src, clip, tgt, settings).motion
            f64 = spread(cpu_results[n].rotations, r64.rotations)
            nudge = rounding_scale([spread(cpu_results[n].rotations,
                                           _retarget(rt, src, nudged(clip, seed), tgt, settings).motion.rotations)
                                    for seed in range(NUDGE_SAMPLES)])
        res, dt, peak = _timed(rt, src, clip, tgt, repro, cuda)
        log(f"  {n} frames on {device}: " + ", ".join(f"{k} {v:.2f}" for k, v in res.timings.items())
            + f"; pose graphed: {res.solver_stats.get('cuda_graph')}, with the dense terms: "
            f"{res.solver_stats.get('cuda_graph_terms')} {res.solver_stats.get('cuda_graph_error', '')}")
        solve = res.timings.get("solve_s", float("nan"))
        res_eager, dt_eager, peak_eager = _timed_eager(rt, src, clip, tgt, repro, cuda)
        graphed_same.append(_identical(res.motion, res_eager.motion))
        with constant(rt, "solver.optim.DETERMINISTIC", False):
            _, dt_fast, _ = _timed(rt, src, clip, tgt, repro, cuda)
        vs_cpu = spread(res.motion.rotations, cpu_results[n].rotations) if n in cpu_results else None
        if vs_cpu is not None:
            checked.append((n, vs_cpu, allowed(rounding_scale([f64, nudge]))))
        same = "not run"
        if n <= 1000:
            twice.append(_identical(_retarget(rt, src, clip, tgt, repro).motion, res.motion))
            same = "identical" if twice[-1] else "differ"
        out(f"| {n} | {n / dt:.0f} ({dt:.1f} s) | {n / solve:.0f} | {n / dt_eager:.0f} ({dt_eager:.1f} s) | "
            f"{'identical' if graphed_same[-1] else 'differ'} | {n / dt_fast:.0f} ({dt_fast:.1f} s) | "
            + (f"{peak:.0f} MB (not graphed {peak_eager:.0f} MB)" if peak is not None else "n/a")
            + f" | {cpu_txt} | {_fmt(vs_cpu)} | {_fmt(f64)} | {_fmt(nudge)} | {same} |")
        if n >= 1000:
            targets[f"GPU ≥ {TARGET_FPS:.0f} frames/s at {n} frames (whole retarget, reproducible)"] = (
                f"{n / dt:.0f} f/s (not reproducible: {n / dt_fast:.0f} f/s)", n / dt >= TARGET_FPS)
    if checked:
        tol = "° / ".join(f"{t:g}" for t in TOLERANCE_DEG)
        targets[f"GPU rotations within the larger of {tol}° and {ROUNDING_FACTOR:g} × the solve's own rounding (the "
                "CPU's float32 vs float64 and vs nudged inputs, the largest) of the CPU's (largest / 99.9th pct / "
                "mean)"] = (
            "; ".join(f"{n} frames {_fmt(got)} (allowed {_fmt(ok)})" for n, got, ok in checked),
            all(g <= a for _, got, ok in checked for g, a in zip(got, ok)))
    if twice:
        targets["GPU: a reproducible solve run twice gives identical rotations and locations"] = (
            f"{sum(twice)} of {len(twice)} lengths identical", all(twice))
    targets["GPU: the pose map as a CUDA graph gives the eager solve's rotations and locations"] = (
        f"{sum(graphed_same)} of {len(graphed_same)} lengths identical", all(graphed_same))
    return targets


def group_check(out, device: str = "cuda", frames: int = 60, iterations: int = 60) -> dict:
    """A joint solve of two characters (``tests.core.synth.couple``: two synthetic humanoids who join hands, onto
    partners of other sizes; no assets needed) on ``device`` twice and on the CPU: whether the reproducible runs
    are identical (the group's set-up and steps under the deterministic switch) and the largest, 99.9th percentile
    and mean angle from the CPU's result; then its conflicts (the terms between the characters among them) and a
    re-solve of the group with their sliders at 0.25 (``RetargetGroup.resolving``), twice: identical?
    Returns {target label: (measured text, passed)}."""
    import numpy as np
    import torch

    from core.solver.conflicts import merge_part_weights, resolution_weights
    from core.pipeline.retarget import RetargetOptions
    from core.pipeline.group import RetargetGroup, run_group
    from core.solver import SolverSettings
    from tests.core.synth import couple, facing, make_humanoid, with_face
    if device.startswith("cuda") and not torch.cuda.is_available():
        return {}
    a, ma, b, mb = couple(frames=frames)
    ta = with_face(make_humanoid(scale=1.25, girth=1.3, name="tall"))
    tb = with_face(make_humanoid(scale=0.8, name="short", object_matrix=facing(0.5 * np.pi, 3.0, 1.0)))

    def solve(dev):
        opts = RetargetOptions(settings=SolverSettings(iterations=iterations, device=dev), metrics=False)
        t = time.perf_counter()
        outcome = run_group(RetargetGroup([(a, ma, ta), (b, mb, tb)], opts))
        return outcome, time.perf_counter() - t

    def resolved(outcome):
        pws = [merge_part_weights(*[resolution_weights(c, 0.25) for c in m.conflicts]) for m in outcome.members]
        job = RetargetGroup.resolving(outcome, pws, 0.25)
        t = time.perf_counter()
        for _ in job.steps():
            pass
        return job.outcome, time.perf_counter() - t
    first, dt = solve(device)
    again, _ = solve(device)
    cpu, dt_cpu = solve("cpu")
    same = all(_identical(x.motion, y.motion) for x, y in zip(first.members, again.members))
    top = [spread(x.motion.rotations, y.motion.rotations) for x, y in zip(first.members, cpu.members)]
    worst = tuple(max(t[i] for t in top) for i in range(3))
    out(f"Joint solve of two characters (synthetic couple, {frames} frames, {iterations} steps) on {device}: "
        f"{dt:.1f} s (CPU {dt_cpu:.1f} s); run twice: {'identical' if same else 'differ'}; rotations vs the CPU "
        f"{_fmt(worst)}")
    listed = [[(c.body_part, c.term_a, c.term_b) for c in m.conflicts] for m in first.members]
    listed_again = [[(c.body_part, c.term_a, c.term_b) for c in m.conflicts] for m in again.members]
    partner = sum(1 for cs in listed for c in cs if "partner" in c)
    re1, dt_re = resolved(first)
    re2, _ = resolved(again)
    re_same = all(_identical(x.motion, y.motion) for x, y in zip(re1.members, re2.members))
    out(f"Its conflicts on {device}: {sum(map(len, listed))} ({partner} with the terms between the characters), "
        f"{'the same' if listed == listed_again else 'not the same'} twice; the group re-solved with their sliders "
        f"at 0.25 ({re1.job.total} steps) {dt_re:.1f} s, twice {'identical' if re_same else 'differ'}")
    ok = same and re_same and listed == listed_again
    return {"GPU: a joint solve of two characters, its conflicts and its re-solve, run twice, give identical results":
            ("identical" if ok else "differ", ok)}


class _CoreUnpickler(pickle.Unpickler):
    """Reads a case pickled under the installed extension's module names (``bl_ext.<repo>.reconform.core.x``) as
    this checkout's ``core.x``."""

    def find_class(self, module, name):
        if module.startswith("bl_ext.") and ".reconform.core" in module:
            module = "core" + module.split(".reconform.core", 1)[1]
        return super().find_class(module, name)


def save_case(path):
    """Prepare the scaling case's characters (bpy: imports the assets) and pickle (source, clip, target)."""
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    sys.path.insert(0, str(ROOT / "tools" / "render"))
    import common
    mods = common.enable_addon()
    loader = common.Loader(mods, print)
    src, smo, _ = loader.source(common.SCALING[0])
    _, tgt, _ = loader.character(common.SCALING[1])
    with open(path, "wb") as f:
        pickle.dump(dict(case=common.SCALING[:2], source=src, motion=smo, target=tgt), f)
    print(f"saved {path}: {common.SCALING[0]} ({smo.num_frames} frames) → {common.SCALING[1]}")


def _without_pot():
    """Let core import where POT is not installed (a GPU machine's image may lack it): a prepared case's characters
    carry their key vertices, so the bench runs no optimal transport; a stand-in module says so if anything calls it."""
    try:
        import ot  # noqa: F401
    except ImportError:
        import types

        def absent(*_, **__):
            raise RuntimeError("POT is not installed on this machine: key vertices cannot be transferred here; "
                               "prepare the case where POT is (--save-case).")
        sys.modules["ot"] = types.SimpleNamespace(__name__="ot", dist=absent, sinkhorn=absent)
        print("POT is not installed here: the prepared case needs no key-vertex transfer (a stand-in refuses any).")


def load_case(path, threads=None) -> dict:
    """The case pickled by ``--save-case`` (``case``, ``source``, ``motion``, ``target``), read on this machine with or
    without POT; ``threads``: torch's CPU threads, when given."""
    import torch
    if threads:
        torch.set_num_threads(threads)
    _without_pot()
    with open(path, "rb") as f:
        return _CoreUnpickler(f).load()


def device_label(device: str) -> str:
    """``device``, with the GPU's name and torch's version when it is CUDA."""
    import torch
    if not device.startswith("cuda"):
        return device
    return f"{device} ({torch.cuda.get_device_name(0)}, torch {torch.__version__})"


def case_arguments(ap, required: bool = True):
    """``--case`` (a pickle from ``--save-case``), ``--device`` and ``--threads`` on ``ap``: what this bench and the
    GPU experiments (tools/experiments/gpu_*.py) take to run a prepared case (``load_case``)."""
    ap.add_argument("--case", required=required, help="a pickled case (--save-case) to run on this machine's GPU")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--save-case", help="prepare the scaling case here (needs bpy) and pickle it to this file")
    case_arguments(ap, required=False)
    ap.add_argument("--frames", default=",".join(map(str, FRAMES)))
    ap.add_argument("--cpu-frames", default=",".join(map(str, CPU_FRAMES)))
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable), as "
                    "tools/bench/run.py's")
    ap.add_argument("--group", action="store_true", help="also a joint solve of two synthetic characters, twice "
                    "on the device and once on the CPU (group_check)")
    ap.add_argument("--profile", type=int, default=0, help="then profile one retarget of this many frames on the "
                    "device (torch.profiler: the top operators by self time)")
    args = ap.parse_args(argv)
    if args.save_case:
        return save_case(args.save_case)
    if not args.case:
        ap.error("give --case FILE (or --save-case FILE where bpy is installed)")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    sys.path.insert(0, str(ROOT / "tools" / "render"))
    case = load_case(args.case, args.threads)
    from common import setting_overrides, tile
    from core.pipeline import retarget as rt
    from core.solver import SolverSettings
    from core.types import Motion
    print(f"case: {case['case'][0]} → {case['case'][1]}; balanced preset")
    t0 = time.perf_counter()
    ints = lambda s: tuple(int(x) for x in s.split(",") if x)
    targets = section(print, rt, lambda m, n: tile(Motion, m, n), case["source"], case["motion"], case["target"],
                      SolverSettings.preset("balanced", **setting_overrides(args.set)), ints(args.frames),
                      ints(args.cpu_frames),
                      device=args.device, log=lambda line: print(f"{line} [{time.perf_counter() - t0:.0f} s]"))
    if args.group:
        print()
        targets.update(group_check(print, device=args.device))
    print()
    for label, (measured, ok) in targets.items():
        print(f"- {label}: {measured} — {'PASS' if ok else 'FAIL'}")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
        on_dev = SolverSettings.preset("balanced", device=args.device, **setting_overrides(args.set))
        with profile(activities=acts) as prof:
            _retarget(rt, case["source"], tile(Motion, case["motion"], args.profile), case["target"], on_dev)
        key = "self_cuda_time_total" if args.device.startswith("cuda") else "self_cpu_time_total"
        for sort in ("self_cpu_time_total", key)[: 1 + (key != "self_cpu_time_total")]:
            print(prof.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=50))


if __name__ == "__main__":
    main()
