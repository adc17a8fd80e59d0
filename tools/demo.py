"""`make demo`: build the embedded demo scene and retarget it headless.

    python tools/demo.py --out demo_output [--method auto|reconform|copy_rotations] [--quality fast]

1. tools/make_demo_scene.py generates three skinned humanoids (core.body) and a source motion keyed by code
   (steps, clap, hands on hips, squat) and saves <out>/demo.blend.
2. The source motion is retargeted onto 'TallThin' and 'ShortHeavy' through the add-on pipeline
   (``reconform_addon.pipeline.retarget``): the ReConForM solve when the solver is available ('auto'),
   else copy-rotations with a message. The copy-rotations baseline is always written too (its metrics with
   ``--compare``, or when it is the method).
3. Writes <out>/output.blend (new Actions assigned, scene range set) and <out>/report.txt.
Runs as ``python tools/demo.py`` (bpy wheel) or ``blender -b --python tools/demo.py -- ARGS``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_demo_scene  # noqa: E402

TARGETS = ("TallThin", "ShortHeavy")
METRIC_KEYS = ("jerk_mean", "floor_penetration_mean", "self_penetration_mean", "grounded_f1", "sliding_f1",
               "contact_f1")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="demo.py", description="Build the demo scene and retarget it headless.")
    p.add_argument("--out", default="demo_output", help="output folder (demo.blend, output.blend, report.txt)")
    p.add_argument("--method", choices=("auto", "reconform", "copy_rotations"), default="auto")
    p.add_argument("--quality", choices=("fast", "balanced", "best"), default="fast", help="solver preset")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="frame range (default: all)")
    p.add_argument("--compare", action="store_true",
                   help="also measure the copy-rotations baseline with core.metrics (slow: key-vertex transfer)")
    return p.parse_args(argv)


def _solver_available(mod_name) -> str:
    """'' when the ReConForM solver can run here, else the reason."""
    try:
        importlib.import_module(f"{mod_name}.core.solver").SolveJob  # noqa: B018
        importlib.import_module("torch")
    except Exception as ex:  # missing module, missing torch
        return f"{type(ex).__name__}: {ex}"
    return ""


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _metrics_lines(metrics: dict, indent="      "):
    if not metrics:
        return [f"{indent}(no metrics)"]
    flat = {}
    for k, v in metrics.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, (int, float)):
                    flat[f"{k}.{k2}"] = v2
        elif isinstance(v, (int, float)):
            flat[k] = v
    keys = sorted(flat)
    return [f"{indent}{k}: {_fmt(flat[k])}" for k in keys]


def run(args, log):
    import bpy

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    info = make_demo_scene.build_scene(os.path.join(out, "demo.blend"), report=log)
    t_scene = time.perf_counter() - t0
    mod_name = make_demo_scene._module()
    pipeline = importlib.import_module(f"{mod_name}.reconform_addon.pipeline")
    method = args.method
    note = ""
    if method in ("auto", "reconform"):
        why = _solver_available(mod_name)
        if why:
            note = f"ReConForM solver not available ({why}); fell back to copy_rotations."
            log(note)
            method = "copy_rotations"
        else:
            method = "reconform"
    src = bpy.data.objects["Source"]
    start, end = args.frames if args.frames else (None, None)
    results = {}
    for name in TARGETS:
        tgt = bpy.data.objects[name]
        log(f"copy_rotations baseline: Source -> {name}")
        base = pipeline.retarget(src, tgt, method="copy_rotations", frame_start=start, frame_end=end,
                                 name=f"{name}_copy_rotations", report=lambda m: None)
        entry = {"copy_rotations": base.report}
        if args.compare or method == "copy_rotations":
            entry["copy_rotations_metrics"] = _evaluate(pipeline, mod_name, src, tgt, base, start, end, log)
        if method == "reconform":
            log(f"ReConForM ({args.quality}): Source -> {name}")
            res = pipeline.retarget(src, tgt, method="reconform", frame_start=start, frame_end=end,
                                    settings={"quality": args.quality}, name=f"{name}_reconform",
                                    report=lambda m: log("  " + m) if m.startswith("solve") else None)
            entry["reconform"] = res.report
        results[name] = entry
    scene = bpy.context.scene
    any_rep = next(iter(results.values()))["copy_rotations"]
    scene.frame_start, scene.frame_end = any_rep["frame_start"], any_rep["frame_end"]
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(out, "output.blend"), copy=True)
    log(f"saved {os.path.join(out, 'output.blend')}")
    text = _report(info, method, args.quality, note, results, t_scene, time.perf_counter() - t0)
    with open(os.path.join(out, "report.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    log(f"report {os.path.join(out, 'report.txt')}")
    print(text)
    return results


_PREPARED = {}


def _evaluate(pipeline, mod_name, src_obj, tgt_obj, result, start, end, log):
    """core.metrics.evaluate for a written result (None when the metrics module is not there)."""
    try:
        metrics = importlib.import_module(f"{mod_name}.core.metrics")
    except ImportError:
        return None
    try:
        if src_obj.name not in _PREPARED:                  # the key-vertex transfer is slow: once per character
            _PREPARED[src_obj.name] = pipeline.prepare_character(src_obj, keyvert_count=41)
        src = _PREPARED[src_obj.name]
        tgt = pipeline.prepare_character(tgt_obj, keyvert_count=41)
        motion = pipeline.read_motion(src_obj, src.skeleton, frame_start=start, frame_end=end)
        return pipeline._plain(metrics.evaluate(src, motion, tgt, result.motion))
    except Exception as ex:  # metrics are a report extra: say why they are missing
        log(f"metrics unavailable for {tgt_obj.name}: {type(ex).__name__}: {ex}")
        return None


def _report(info, method, quality, note, results, t_scene, t_total) -> str:
    lines = ["ReConForM demo report", "=" * 21, ""]
    lines.append("Characters (generated by core.body):")
    for name, c in info["characters"].items():
        lines.append(f"  {name}: {c['height_m']} m, {c['rest_pose']}-pose rest, {c['verts']} vertices, "
                     f"{c['bones']} bones ({c['params']})")
    lines.append(f"Source motion: 'DemoMotion', {info['frames']} frames at {make_demo_scene.FPS} fps; events: " +
                 ", ".join(f"{k} {a}-{b}" for k, (a, b) in info["events"].items()))
    lines.append(f"Method: {method}" + (f" (quality '{quality}')" if method == "reconform" else ""))
    if note:
        lines.append(f"Note: {note}")
    lines.append("")
    for name, e in results.items():
        cr = e["copy_rotations"]
        lines.append(f"Source -> {name}: frames {cr['frame_start']}-{cr['frame_end']} ({cr['frames']})")
        lines.append(f"  copy_rotations: Action '{cr['action']}', timings {cr['timings']}")
        if "copy_rotations_metrics" in e:
            lines.extend(_metrics_lines(e["copy_rotations_metrics"]))
        if "reconform" in e:
            rc = e["reconform"]
            lines.append(f"  reconform: Action '{rc['action']}', timings {rc['timings']}")
            lines.extend(_metrics_lines(rc.get("metrics")))
        lines.append("")
    lines.append(f"Scene build {t_scene:.1f} s, total {t_total:.1f} s (wall clock, this machine).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    args = parse_args(argv)
    t0 = time.perf_counter()

    def log(msg):
        print(f"[demo {time.perf_counter() - t0:6.1f}s] {msg}", flush=True)

    try:
        with make_demo_scene.Addon():
            run(args, log)
    except Exception as ex:
        name = type(ex).__name__
        if name in ("BridgeError", "CoreError"):
            print(f"error: {str(ex).strip().splitlines()[0]}", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
