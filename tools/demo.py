"""`make demo`: build the embedded demo scene and retarget it headless.

    python tools/demo.py --out demo_output [--method auto|reconform|copy_rotations] [--quality fast]

1. tools/make_demo_scene.py generates three skinned humanoids (core.body) and a source motion keyed by code
   (steps, clap, hands on hips, squat) and saves <out>/demo.blend.
2. The source motion is retargeted onto 'TallThin' and 'ShortHeavy' through the add-on pipeline
   (``reconform_addon.pipeline.retarget``, the path the panel and the batch command take): the ReConForM solve
   ('auto' or 'reconform'), or copy-rotations alone. With ReConForM the copy-rotations baseline it started
   from is written too, as its own Action, and the report gives both sets of metrics.
3. The couple ('Lead' holding 'Follow''s hand, a hand on her shoulder, stepping sideways together) is
   retargeted together onto 'Giant' (2.05 m) and 'Child' (1.30 m) (``reconform_addon.pipeline_group``,
   ReConForM §6.1); the report gives the partner metrics of the result and of copy-rotations placed together.
4. Writes <out>/output.blend (new Actions assigned, scene range set) and <out>/report.txt.
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
#: the couple retargeted together onto partners of very different sizes: (source, target, source clip)
COUPLE = (("Lead", "Giant", "LeadDance"), ("Follow", "Child", "FollowDance"))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="demo.py", description="Build the demo scene and retarget it headless.")
    p.add_argument("--out", default="demo_output", help="output folder (demo.blend, output.blend, report.txt)")
    p.add_argument("--method", choices=("auto", "reconform", "copy_rotations"), default="auto")
    p.add_argument("--quality", choices=("fast", "balanced", "best"), default="fast", help="solver preset")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="frame range (default: all)")
    return p.parse_args(argv)


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
    write = importlib.import_module(f"{mod_name}.reconform_addon.bridge.write")
    method = "reconform" if args.method == "auto" else args.method
    src = bpy.data.objects["Source"]
    start, end = args.frames if args.frames else (None, None)
    results = {}
    for name in TARGETS:
        tgt = bpy.data.objects[name]
        log(f"{method} ({args.quality}): Source -> {name}")
        res = pipeline.retarget(src, tgt, method=method, frame_start=start, frame_end=end,
                                settings={"quality": args.quality}, name=f"{name}_{method}",
                                report=lambda m: log("  " + m) if m.startswith("Solving") else None)
        entry = {method: res.report}
        if method == "reconform":   # the copy-rotations baseline, kept in the file beside the result
            base = write.write_motion(tgt, res.outcome.target.skeleton, res.outcome.init_motion,
                                      f"{name}_copy_rotations")
            base.use_fake_user = True
            write.assign_action(tgt, res.action)
            entry["copy_rotations"] = {"action": base.name, "metrics": res.report["reference_metrics"]}
        results[name] = entry
    results["couple"] = _couple(args, log, method, importlib.import_module(f"{mod_name}.reconform_addon.pipeline_group"),
                                write)
    scene = bpy.context.scene
    any_rep = results[TARGETS[0]][method]
    scene.frame_start, scene.frame_end = any_rep["frame_start"], any_rep["frame_end"]
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(out, "output.blend"), copy=True)
    log(f"saved {os.path.join(out, 'output.blend')}")
    text = _report(info, method, args.quality, results, t_scene, time.perf_counter() - t0)
    with open(os.path.join(out, "report.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    log(f"report {os.path.join(out, 'report.txt')}")
    print(text)
    return results


def _couple(args, log, method, group, write):
    """The couple retargeted together (ReConForM §6.1) onto the partners, through ``pipeline_group`` (the path
    the panel's Partners list and the batch command take); with ReConForM, copy-rotations placed together (the
    start) is written beside each result."""
    import bpy

    pairs = [(bpy.data.objects[s], bpy.data.objects[t], bpy.data.actions[a]) for s, t, a in COUPLE]
    log(f"{method} ({args.quality}), together: " + ", ".join(f"{s} -> {t}" for s, t, _ in COUPLE))
    res = group.retarget_group(pairs, method=method, settings={"quality": args.quality},
                               names=[f"{t}_{method}" for _, t, _ in COUPLE],
                               report=lambda m: log("  " + m) if m.startswith("Solving") else None)
    rep = dict(res.report)
    if method == "reconform":
        rep["copy_rotations_actions"] = []
        for (_, tgt, _), member, act in zip(pairs, res.outcome.members, res.actions):
            base = write.write_motion(tgt, member.target.skeleton, member.init_motion, f"{tgt.name}_copy_rotations")
            base.use_fake_user = True
            write.assign_action(tgt, act)
            rep["copy_rotations_actions"].append(base.name)
    return rep


def _couple_report(rep, method) -> list:
    lines = [f"Lead -> Giant and Follow -> Child, together ({rep['characters']} characters, {method}):"]
    for p in rep["pairs"]:
        lines.append(f"  {p['source']['armature']} -> {p['target']['armature']}: Action '{p['action']}', "
                     f"frames {p['frame_start']}-{p['frame_end']}")
    if rep.get("copy_rotations_actions"):
        lines.append("  copy-rotations placed together (the start): " + ", ".join(
            f"'{a}'" for a in rep["copy_rotations_actions"]))
    pm, ref = rep.get("partner_metrics") or {}, rep.get("partner_reference_metrics") or {}
    if pm:
        lines.append("  partner metrics (docs/metrics.md \"Partners\"), result [copy-rotations placed together]:")
        lines += [f"      {k}: {_fmt(v)}" + (f"  [{_fmt(ref[k])}]" if k in ref else "") for k, v in sorted(pm.items())]
    for p in rep["pairs"]:
        lines.append(f"  {p['target']['armature']}'s own metrics:")
        lines.extend(_metrics_lines(p.get("metrics"), indent="      "))
    lines.append(f"  timings {rep['timings']}")
    lines.extend(f"  note: {n}" for n in rep.get("notes", []))
    return lines + [""]


def _report(info, method, quality, results, t_scene, t_total) -> str:
    lines = ["ReConForM demo report", "=" * 21, ""]
    lines.append("Characters (generated by core.body):")
    for name, c in info["characters"].items():
        lines.append(f"  {name}: {c['height_m']} m, {c['rest_pose']}-pose rest, {c['verts']} vertices, "
                     f"{c['bones']} bones ({c['params']})")
    lines.append(f"Source motion: 'DemoMotion', {info['frames']} frames at {make_demo_scene.FPS} fps; events: " +
                 ", ".join(f"{k} {a}-{b}" for k, (a, b) in info["events"].items()))
    lines.append(f"Method: {method}" + (f" (quality '{quality}')" if method == "reconform" else ""))
    lines.append("")
    for name, e in results.items():
        if name == "couple":
            continue
        rep = e[method]
        lines.append(f"Source -> {name}: frames {rep['frame_start']}-{rep['frame_end']} ({rep['frames']})")
        if "copy_rotations" in e and method != "copy_rotations":
            cr = e["copy_rotations"]
            lines.append(f"  copy_rotations (baseline): Action '{cr['action']}'")
            lines.extend(_metrics_lines(cr.get("metrics")))
        lines.append(f"  {method}: Action '{rep['action']}', timings {rep['timings']}")
        lines.extend(_metrics_lines(rep.get("metrics")))
        lines.extend(f"  note: {n}" for n in rep.get("notes", []))
        lines.append("")
    lines.append(f"Couple: 'LeadDance' and 'FollowDance', {info['couple_frames']} frames at {make_demo_scene.FPS} fps; "
                 "events: " + ", ".join(f"{k} {a}-{b}" for k, (a, b) in info["couple_events"].items()))
    lines.extend(_couple_report(results["couple"], method))
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
