"""`make demo`: build the embedded demo scene and retarget it headless.

    python tools/demo.py --out demo_output [--method auto|reconform|copy_rotations] [--quality fast] [--set NAME=VALUE]

1. tools/make_demo_scene.py generates three skinned humanoids (core.body) and a source motion keyed by code
   (steps, clap, hands on hips, squat) and saves <out>/demo.blend.
2. The source motion is retargeted onto 'TallThin' and 'ShortHeavy' through the add-on pipeline
   (``reconform_addon.pipeline.retarget``, the path the panel and the batch command take): the ReConForM solve
   ('auto' or 'reconform'), or copy-rotations alone. With ReConForM the copy-rotations baseline it started
   from is written too, as its own Action, and the report gives both sets of metrics.
3. The flat-ground walk 'DemoWalk' is retargeted onto 'StairsClimber' over the ground object 'Stairs' and onto
   'RampWalker' up 'Ramp' (``pipeline.retarget(..., ground=...)``: the path the panel's Ground picker and the
   batch command's --ground take), copy-rotations beside it; the report names the ground and gives both sets
   of metrics above it (floor penetration, grounded and foot-locked F1, jerk and root jerk).
4. The couple ('Lead' holding 'Follow''s hand, a hand on her shoulder, stepping sideways together) is
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
#: the walk over a ground object: (target, ground object), both built by tools/make_demo_scene.py
TERRAIN_WALKS = tuple((walker, ground) for ground, (walker, _) in make_demo_scene.GROUNDS.items())
#: the couple retargeted together onto partners of very different sizes: (source, target, source clip)
COUPLE = (("Lead", "Giant", "LeadDance"), ("Follow", "Child", "FollowDance"))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="demo.py", description="Build the demo scene and retarget it headless.")
    p.add_argument("--out", default="demo_output", help="output folder (demo.blend, output.blend, report.txt)")
    p.add_argument("--method", choices=("auto", "reconform", "copy_rotations"), default="auto")
    p.add_argument("--quality", choices=("fast", "balanced", "best"), default="fast", help="solver preset")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="frame range (default: all)")
    p.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable), as "
                   "tools/bench/run.py's")
    return p.parse_args(argv)


def _settings(args) -> dict:
    """The solver settings as the panel names them: the preset ('quality') and any ``--set`` overrides."""
    from settings_args import setting_overrides
    return {"quality": args.quality, **setting_overrides(args.set)}


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

    def retarget(name, label, **kw):
        """One retarget through the pipeline; with ReConForM, its copy-rotations start written beside it."""
        tgt = bpy.data.objects[name]
        res = pipeline.retarget(src, tgt, method=method, settings=_settings(args),   # as the panel names it
                                **kw)
        entry = {method: res.report}
        if method == "reconform":   # the copy-rotations baseline, kept in the file beside the result
            base = write.write_motion(tgt, *res.outcome.for_scene(res.outcome.init_motion),
                                      f"{res.action.name} (copy rotations)")
            base.use_fake_user = True
            write.assign_action(tgt, res.action)
            entry["copy_rotations"] = {"action": base.name}
        results[label] = entry

    for name in TARGETS:
        log(f"{method} ({args.quality}): Source -> {name}")
        retarget(name, name, frame_start=start, frame_end=end,
                 report=lambda m: log("  " + m) if m.startswith("Solving") else None)
    walk = bpy.data.actions[info["walk"]["action"]]
    for name, ground in TERRAIN_WALKS:
        log(f"{method} ({args.quality}): Source '{walk.name}' -> {name} on '{ground}'")
        retarget(name, f"{name} on {ground}", action=walk, ground=bpy.data.objects[ground],
                 report=lambda m: log("  " + m) if m.startswith(("Solving", "ground")) else None)
    results["couple"] = _couple(args, log, method, importlib.import_module(f"{mod_name}.reconform_addon.pipeline_group"),
                                write)
    scene = bpy.context.scene
    any_rep = results[TARGETS[0]][method]
    scene.frame_start, scene.frame_end = any_rep["frame_start"], any_rep["frame_end"]
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(out, "output.blend"), copy=True)
    log(f"saved {os.path.join(out, 'output.blend')}")
    report = importlib.import_module(f"{mod_name}.core.metrics.report")
    text = _report(info, method, args.quality, results, t_scene, time.perf_counter() - t0, report)
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
    res = group.retarget_group(pairs, method=method, settings=_settings(args),
                               report=lambda m: log("  " + m) if m.startswith("Solving") else None)
    rep = dict(res.report)
    if method == "reconform":
        rep["copy_rotations_actions"] = []
        for (_, tgt, _), member, act in zip(pairs, res.outcome.members, res.actions):
            base = write.write_motion(tgt, *member.for_scene(member.init_motion), f"{act.name} (copy rotations)")
            base.use_fake_user = True
            write.assign_action(tgt, act)
            rep["copy_rotations_actions"].append(base.name)
    return rep


def _couple_report(rep, method, report) -> list:
    lines = [f"Lead -> Giant and Follow -> Child, together ({rep['characters']} characters, {method}):"]
    for p in rep["pairs"]:
        lines.append(f"  {p['source']['armature']} -> {p['target']['armature']}: Action '{p['action']}', "
                     f"frames {p['frame_start']}-{p['frame_end']}")
    if rep.get("copy_rotations_actions"):
        lines.append("  copy-rotations placed together (the start): " + ", ".join(
            f"'{a}'" for a in rep["copy_rotations_actions"]))
    if rep.get("partner_metrics"):
        lines.append("  Between the characters (docs/metrics.md \"Partners\"; copy-rotations placed together beside):")
        lines.extend(report.text_table(rep["partner_metrics"], rep.get("partner_reference_metrics"), method,
                                       indent="    "))
    for p in rep["pairs"]:
        lines.append(f"  {p['target']['armature']}'s own metrics; verdict: {p['verdict']}")
        lines.extend(report.text_table(p.get("metrics"), p.get("reference_metrics"), method, indent="    "))
    lines.append("  Timings: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f} s"
                                          for k, v in rep["timings"].items()))
    lines.extend(f"  note: {n}" for n in rep.get("notes", []))
    return lines + [""]


def _report(info, method, quality, results, t_scene, t_total, report) -> str:
    """report.txt: the scene, then per target the Actions written, the verdict and the metrics beside
    copy-rotations' (``core.metrics.report``: names, units, which is better), then the couple."""
    lines = ["ReConForM demo report", "=" * 21, ""]
    lines.append("Characters (generated by core.body):")
    for name, c in info["characters"].items():
        lines.append(f"  {name}: {c['height_m']} m, {c['rest_pose']}-pose rest, {c['verts']} vertices, "
                     f"{c['bones']} bones ({c['params']})")
    lines.append(f"Source motion: 'DemoMotion', {info['frames']} frames at {make_demo_scene.FPS} fps; events: " +
                 ", ".join(f"{k} {a}-{b}" for k, (a, b) in info["events"].items()))
    lines.append(f"Walk over grounds: 'DemoWalk', {info['walk']['frames']} frames; " + ", ".join(
        f"'{g}' ({d['height_m']} m high) under '{d['walker']}'" for g, d in info["grounds"].items()))
    lines.append(f"Method: {report.METHOD_LABELS[method]}" + (f" (quality '{quality}')" if method == "reconform"
                                                             else ""))
    lines.append("")
    for name, e in results.items():
        if name == "couple":
            continue
        rep = e[method]
        lines.append(f"Source -> {name}: frames {rep['frame_start']}-{rep['frame_end']} ({rep['frames']})")
        g = rep.get("ground") or {}
        if g.get("grid"):
            lines.append(f"  ground '{g['object']}': {g['grid'][0]} x {g['grid'][1]} samples every "
                         f"{100 * g['spacing_m']:.3g} cm, {g['holes']} holes, {g['beyond_edge']} beyond its edge, "
                         f"{g['overhangs']} overhangs, heights "
                         f"{g['height_range_m'][0]:.2f} to {g['height_range_m'][1]:.2f} m")
        written = [f"'{rep['action']}' ({report.METHOD_LABELS[method]}, assigned to '{rep['target']['armature']}')"]
        if "copy_rotations" in e and method != "copy_rotations":
            written.append(f"'{e['copy_rotations']['action']}' (the copy-rotations baseline it started from, "
                           "kept with a fake user)")
        lines.append("  Actions: " + "; ".join(written))
        lines.append(f"  Verdict: {rep['verdict']}")
        lines.append("  Metrics (definitions: docs/metrics.md):")
        lines.extend(report.text_table(rep.get("metrics"), rep.get("reference_metrics"), method, indent="    "))
        lines.append("  Timings: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f} s"
                                              for k, v in rep["timings"].items()))
        lines.extend(f"  Note: {n}" for n in rep.get("notes", []))
        lines.append("")
    lines.append(f"Couple: 'LeadDance' and 'FollowDance', {info['couple_frames']} frames at {make_demo_scene.FPS} fps; "
                 "events: " + ", ".join(f"{k} {a}-{b}" for k, (a, b) in info["couple_events"].items()))
    lines.extend(_couple_report(results["couple"], method, report))
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
    import extension
    extension.exit_after(main)
