"""Headless retargeting from the command line.

Runs the same way in a Blender binary and with the bpy wheel::

    blender -b --factory-startup --python-exit-code 1 --python tools/retarget.py -- ARGS
    .venv/bin/python tools/retarget.py ARGS

Examples (docs/bridge.md has more)::

    python tools/retarget.py --source walk.bvh --target hero.glb --out out.blend --report report.json
    python tools/retarget.py --blend scene.blend --source Mocap --target Hero --frames 1 120 \\
        --method reconform --setup setup.json --export out.fbx --export out.glb
    python tools/retarget.py --source walk.bvh --target hero.glb --ground Stairs --ground-file set.blend \\
        --method reconform --out out.blend
    # several characters retargeted together (one world frame; one new Action per target)
    python tools/retarget.py --method reconform --source lead.bvh --target tall.glb \\
        --source follow.bvh --target short.glb --out couple.blend --report couple.json

Exit status: 0 on success; 1 with one line ``error: <reason>`` on stderr for bad input (nothing to write, an
unknown export format, frames out of order or past the clip without --clamp-frames, a motion given as --target,
missing object or file, unreadable file, an output that cannot be written, armature without a mesh when the
method needs one, nothing mapped, a broken clip; checked before Blender and PyTorch load where they can be:
tools/batch_checks.py); 2 for bad arguments; 3 for an internal error (traceback printed); 130 when
interrupted (Ctrl+C). Outputs are checked before any work and written all or none: a failed run writes
nothing. Without ``--blend`` the run starts from an empty scene. Blender's and the importers' messages are
shown with ``--verbose`` only; ``--quiet`` prints errors only. Every temporary folder the run makes is
removed at the end, also after an error or Ctrl+C.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import batch_checks  # noqa: E402  (tools/batch_checks.py: arguments and files checked before Blender loads)
import batch_io  # noqa: E402  (tools/batch_io.py: the console and the all-or-none outputs)
import extension  # noqa: E402  (tools/extension.py: the one helper that enables the extension)
REPO_NAME = "reconform_batch"
MODULE = f"bl_ext.{REPO_NAME}.reconform"
#: conflicts of a group listed in its text report (all of them in the JSON report)
GROUP_CONFLICTS_SHOWN = 10


class UserError(Exception):
    """Bad input detected by the command itself (one line)."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="retarget.py", description="Retarget an animation onto another character.")
    p.add_argument("--blend", help=".blend file to open first (object names then refer to it)")
    p.add_argument("--source", action="append", default=[],
                   help="source: file (.blend/.fbx/.glb/.gltf/.bvh) or object name; repeat --source/--target to "
                        "retarget several characters together (one world frame)")
    p.add_argument("--target", action="append", default=[], help="target: file or object name (one per --source)")
    p.add_argument("--source-armature", action="append", default=[],
                   help="armature name inside the source file when it has several (one per --source, or none)")
    p.add_argument("--target-armature", action="append", default=[],
                   help="armature name inside the target file when it has several (one per --target, or none)")
    p.add_argument("--action", action="append", default=[],
                   help="source Action name (default: the one playing on the source; one per --source, or none)")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="inclusive frame range")
    p.add_argument("--method", choices=("copy_rotations", "reconform"), default=None,
                   help="retarget method (default: the set-up's, else copy_rotations)")
    p.add_argument("--quality", choices=("fast", "balanced", "best"), help="solver preset (reconform)")
    p.add_argument("--setup", help="JSON set-up: bone maps per character and settings (reusable across clips)")
    p.add_argument("--ground", metavar="OBJECT",
                   help="mesh object the target walks on (stairs, a ramp, a terrain), from the open file, the "
                        "target's file or --ground-file (default: the set-up's 'ground', else the floor z = 0)")
    p.add_argument("--ground-file", metavar="PATH",
                   help="file to import the ground object from (.blend, .fbx, .glb, .gltf, .obj)")
    p.add_argument("--window", type=int, metavar="FRAMES",
                   help="retarget a long clip as overlapping windows of FRAMES frames (reconform, one pair): the "
                        "solver's memory follows the window, not the clip (default: the set-up's 'window', else "
                        "the whole clip at once)")
    p.add_argument("--window-overlap", type=int, metavar="FRAMES",
                   help="frames shared (crossfaded) by consecutive windows (default: a fifth of --window)")
    p.add_argument("--name", action="append", default=[], help="name of the new Action (one per target, or none)")
    p.add_argument("--name-template", metavar="TEMPLATE",
                   help="name of each new Action from {source} (source armature), {target} (target armature), "
                        "{action} (source Action) and {method}, e.g. '{source}_{target}' (default: "
                        "'<source Action> to <target>'; --name wins)")
    p.add_argument("--clamp-frames", action="store_true",
                   help="retarget the part of --frames that lies inside the clip (default: a range reaching past "
                        "the clip is an error)")
    p.add_argument("--out", help="write the result .blend here")
    p.add_argument("--export", action="append", default=[],
                   help="export the targets with their new clip (.fbx, .glb, .gltf, .bvh); repeatable; {target} in "
                        "the path writes one file per character")
    p.add_argument("--fbx-preset", choices=("blender", "unity", "unreal"), default="blender",
                   help="axes and units of an .fbx export (docs/bridge.md \"Exports\"; default: blender)")
    p.add_argument("--root-motion", choices=("keep", "in-place"), default="keep",
                   help="in-place: take the root bone's horizontal travel out of the new clip (the result .blend "
                        "and the exports); default: keep")
    p.add_argument("--show-map", action="store_true",
                   help="print each character's detected bone map and which meshes form its body, then exit")
    p.add_argument("--save-setup", metavar="FILE.json",
                   help="write each character's bone map and body meshes as a set-up to edit and pass back with "
                        "--setup, then exit")
    p.add_argument("--report", help="write a report (.json or .txt)")
    p.add_argument("--no-baseline-metrics", action="store_true",
                   help="measure the result only, not copy-rotations beside it (reconform: one column in the "
                        "report, and the metrics' time about two thirds); default: the set-up's "
                        "\"baseline_metrics\", else both")
    p.add_argument("--series", help="write per-frame series (each foot's height: source, copy-rotations, result) "
                   "as .json, for the library report (tools/library.py); one pair only")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("--quiet", action="store_true", help="print errors only")
    talk.add_argument("--verbose", action="store_true", help="also show Blender's and the importers' messages")
    args = p.parse_args(argv)
    if args.report and os.path.splitext(args.report)[1].lower() not in (".json", ".txt"):
        p.error(f"--report {args.report}: use a .json or .txt path")
    if args.series and not args.series.lower().endswith(".json"):
        p.error(f"--series {args.series}: use a .json path")
    if args.series and len(args.source) > 1:
        p.error("--series is for one pair: leave it out when retargeting several characters together")
    if args.window_overlap is not None and args.window is None:
        p.error("--window-overlap needs --window FRAMES")
    if args.window is not None and len(args.source) > 1:
        p.error("--window is for one pair: characters retargeted together are solved over the whole clip")
    if args.out and not args.out.lower().endswith(".blend"):
        p.error(f"--out {args.out}: use a .blend path")
    if args.out and args.blend and os.path.abspath(args.out) == os.path.abspath(args.blend):
        p.error(f"--out {args.out}: the --blend file is never written to; give another path")
    if len(args.source) != len(args.target):
        p.error(f"{len(args.source)} --source but {len(args.target)} --target: give one target per source")
    for opt in ("source_armature", "target_armature", "action", "name"):
        vals = getattr(args, opt)
        if vals and len(vals) != len(args.source):
            p.error(f"--{opt.replace('_', '-')} is given {len(vals)} times for {len(args.source)} pairs: give it once "
                    "per pair, or not at all")
    return args


def output_paths(args) -> list:
    """(option, path) of every output the run writes."""
    return ([("--out", args.out)] if args.out else []) + [("--export", p) for p in args.export] + \
        ([("--report", args.report)] if args.report else []) + ([("--series", args.series)] if args.series else []) \
        + ([("--save-setup", args.save_setup)] if args.save_setup else [])


def enable_addon(repo_name: str = REPO_NAME):
    """The extension enabled as ``bl_ext.<repo_name>.reconform`` (``tools/extension.py``); (module, repo)."""
    return extension.enable_addon(repo_name)


def _resolve(spec, role, arm_name, bridge, log, imported=None):
    """An armature from a file path (imported, once per path: ``imported`` keeps {path: objects}) or an object
    name in the open scene. Only a source's file sets the scene's frame rate: the source's rate governs the
    result."""
    ext = os.path.splitext(spec)[1].lower()
    if ext in bridge.io.SUPPORTED or os.path.sep in spec:
        key = os.path.abspath(spec)
        imported = {} if imported is None else imported
        if key not in imported:
            log(f"importing {role} '{spec}'")
            imported[key] = bridge.import_file(spec, set_scene_fps=role == "source", report=log)
        return bridge.find_armature(imported[key], arm_name)
    return bridge.find_armature(None, arm_name or spec)


def pair_specs(args, setup) -> list:
    """The source→target pairs to retarget: the command line's (--source/--target repeated), else the set-up's
    ``characters`` list. Each is a dict with source, target, source_armature, target_armature, action, name,
    source_bone_map, target_bone_map and part_weights (that character's per-part term factors, multiplied into the
    settings' own) (None where not given)."""
    keys = ("source", "target", "source_armature", "target_armature", "action", "name", "source_bone_map",
            "target_bone_map", "part_weights")
    chars = setup.get("characters")
    if args.source and chars:
        raise UserError("Pairs are given both on the command line and in the set-up's 'characters': use one.")
    if args.source:
        def opt(vals, k):
            return vals[k] if vals else None
        return [dict(source=args.source[k], target=args.target[k], source_armature=opt(args.source_armature, k),
                     target_armature=opt(args.target_armature, k), action=opt(args.action, k),
                     name=opt(args.name, k), source_bone_map=None, target_bone_map=None, part_weights=None)
                for k in range(len(args.source))]
    if not chars:
        raise UserError("Nothing to retarget: give --source and --target, or a set-up with a 'characters' list.")
    out = []
    for k, c in enumerate(chars):
        if not c.get("source") or not c.get("target"):
            raise UserError(f"Set-up 'characters' entry {k + 1} needs a 'source' and a 'target'.")
        unknown = sorted(set(c) - set(keys))
        if unknown:
            raise UserError(f"Set-up 'characters' entry {k + 1}: unknown key '{unknown[0]}' (use {', '.join(keys)}).")
        out.append({key: c.get(key) for key in keys})
    return out


def _group_text_report(rep) -> str:
    """The text report of several characters retargeted together: each pair's, then the partner metrics."""
    import importlib
    report = importlib.import_module(f"{MODULE}.core.metrics.report")
    lines = [f"method: {rep['method']}, {rep['characters']} characters retargeted together"]
    for p in rep["pairs"]:
        lines.append("")
        lines.append(_text_report(p).rstrip("\n"))
    lines.append("")
    if rep.get("partner_metrics"):
        lines.append("between the characters (definitions: docs/metrics.md):")
        lines += report.text_table(rep["partner_metrics"], rep.get("partner_reference_metrics"), rep["method"])
    if rep.get("conflicts"):
        lines.append("conflicts of every character, costliest first (\"partner\": the terms between the characters):")
        lines += [f"  {c['rank']}. {c['character']}: {c['body_part']}: {c['terms'][0]} / {c['terms'][1]}, cost "
                  f"{c['score']:.2f}" for c in rep["conflicts"][:GROUP_CONFLICTS_SHOWN]]
        if len(rep["conflicts"]) > GROUP_CONFLICTS_SHOWN:
            lines.append(f"  … {len(rep['conflicts']) - GROUP_CONFLICTS_SHOWN} more in the JSON report and in each "
                         "pair's list above")
    lines.append("timings: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.2f} s"
                                         for k, v in rep["timings"].items()))
    lines += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines) + "\n"


def _text_report(rep) -> str:
    if "pairs" in rep:
        return _group_text_report(rep)
    import importlib
    report = importlib.import_module(f"{MODULE}.core.metrics.report")   # metric names, units, better/worse, verdict
    lines = [f"method: {rep['method']}",
             f"source: {rep['source']['armature']} action {rep['source_action']} "
             f"({rep['source']['mapped']}/{rep['source']['bones']} bones mapped)",
             f"target: {rep['target']['armature']} ({rep['target']['mapped']}/{rep['target']['bones']} bones mapped)",
             f"new action: {rep['action']}, frames {rep['frame_start']}..{rep['frame_end']} at {rep['fps']:g} fps"]
    if rep.get("timings"):   # a pair of a group: the group's timings
        lines.append("timings: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.2f} s"
                                             for k, v in rep["timings"].items()))
    lines.append(f"verdict: {rep['verdict']}")
    if rep.get("metrics"):
        lines.append("metrics (definitions: docs/metrics.md):")
        lines += report.text_table(rep["metrics"], rep.get("reference_metrics"), rep["method"])
    if rep.get("conflicts"):
        lines.append("conflicts (costliest first: severity × duration):")
        lines += [f"  {c['rank']}. {c['body_part']}: {c['terms'][0]} / {c['terms'][1]}, cost {c['score']:.2f}, "
                  f"cosine {c['cosine']:.2f}, frames " + ", ".join(f"{a}-{b}" if b > a else f"{a}"
                                                                   for a, b in c["spans"])
                  for c in rep["conflicts"]]
    if rep["source"]["unmapped"]:
        lines.append("unmapped source bones: " + ", ".join(rep["source"]["unmapped"]))
    if rep["target"]["unmapped"]:
        lines.append("unmapped target bones: " + ", ".join(rep["target"]["unmapped"]))
    g = rep.get("ground") or {}
    if g.get("grid"):
        lines.append(f"ground: {g['object']}, {g['grid'][0]} x {g['grid'][1]} samples every "
                     f"{100 * g['spacing_m']:.3g} cm, {g['holes']} holes, {g['overhangs']} overhangs, "
                     f"heights {g['height_range_m'][0]:.3f} to {g['height_range_m'][1]:.3f} m")
    else:
        lines.append(f"ground: {g.get('object') or g.get('floor', 'world z = 0')}")
    lines += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines) + "\n"


def _open_scene(args, bpy, bridge, log):
    """The scene the run starts from: ``--blend`` opened (never saved), else an empty one (no startup Cube,
    Light or Camera in the result)."""
    if not args.blend:
        bpy.ops.wm.read_homefile(use_empty=True)
        return
    if not os.path.isfile(args.blend):
        raise bridge.BridgeError(f"Cannot open '{os.path.abspath(args.blend)}': file not found.")
    log(f"opening {args.blend}")
    try:
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend), load_ui=False)
    except RuntimeError as ex:
        raise bridge.BridgeError(f"Cannot open '{os.path.abspath(args.blend)}': "
                                 f"{str(ex).strip().splitlines()[-1]}") from None


def _pair_bone_map(setup_file, setup, spec, role, arm_name):
    """A pair's bone map: its own ``<role>_bone_map`` entry, else the set-up's for the role or armature."""
    own = spec.get(f"{role}_bone_map")
    if own:
        return setup_file.setup_bone_map({role: own}, role, arm_name)
    return setup_file.setup_bone_map(setup, role, arm_name)


def _write_outputs(args, outputs, rep, targets, log, series=None):
    """Every output staged beside its final place, then all renamed into place (``batch_io.Outputs``).
    ``rep``: the report (a group's has one per pair); ``targets``: the target armatures to export; ``series``:
    ``run_report.frame_series`` for --series. The exports come last: they ready the scene for the exporters
    (``bridge.export.prepare_scene``), after the .blend is written."""
    import bpy
    import importlib

    first = rep["pairs"][0] if "pairs" in rep else rep
    rng = (first["frame_start"], first["frame_end"])
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    if abs(fps - first["fps"]) > 1e-6:   # the written Action plays at the scene's rate: the source's
        raise RuntimeError(f"the scene's frame rate changed to {fps:g} fps after the source was read at "
                           f"{first['fps']:g} fps")
    if args.out:
        scene.frame_start, scene.frame_end = rng
        bpy.ops.wm.save_as_mainfile(filepath=outputs.stage(args.out), copy=True)
    if args.report:
        with open(outputs.stage(args.report), "w", encoding="utf-8") as f:
            if args.report.lower().endswith(".json"):
                json.dump(rep, f, indent=2)
            else:
                f.write(_text_report(rep))
    if args.series:
        with open(outputs.stage(args.series), "w", encoding="utf-8") as f:
            json.dump(series, f)
    written = []
    if args.export:
        export = importlib.import_module(f"{MODULE}.reconform_addon.bridge.export")
        clips = dict(zip(targets, export.prepare_scene(targets)))
        for path in args.export:
            for name, real in batch_checks.export_paths(path, [t.name for t in targets]):
                arms = list(targets) if name is None else [t for t in targets if t.name == name]
                t = time.perf_counter()
                export.export(outputs.stage(real), arms, rng, " + ".join(clips[a] for a in arms), args.fbx_preset)
                written.append((real, ", ".join(f"'{clips[a]}'" for a in arms), time.perf_counter() - t))
    outputs.commit()
    for path, clip, seconds in written:
        log(f"exported {path} (clip {clip}, frames {rng[0]}..{rng[1]} at {fps:g} fps; {seconds:.2f} s)")
    for opt, path in output_paths(args):
        if opt != "--export":
            log(f"wrote {path}")


def _refuse_motion_as_target(spec, tgt, bridge):
    """A motion (a skeleton that moves no mesh and plays a clip: a .bvh, a mocap .fbx) given as --target is a
    mistake: say so, and what to give instead."""
    if bridge.find_meshes(tgt):
        return
    ad = tgt.animation_data
    clip = getattr(ad, "action", None) if ad else None
    if clip is None and not (ad and len(ad.nla_tracks)):
        return
    raise UserError(f"--target {spec['target']}: '{tgt.name}' is a motion (a skeleton that moves no mesh, playing "
                    f"{repr(clip.name) if clip else 'NLA strips'}), not a character with a mesh: give the motion as "
                    "--source and, as --target, a character whose armature deforms a mesh (.glb, .fbx, .blend).")


def _check_frames(args, pairs, bridge):
    """--frames reaching past a source clip is an error unless --clamp-frames (then the clip's part of it is
    retargeted, with a note). A range wholly outside, or a clip that repeats, is left to the pipeline."""
    if not args.frames or args.clamp_frames:
        return
    import importlib
    clip = importlib.import_module(f"{MODULE}.reconform_addon.bridge.clip")
    animation = importlib.import_module(f"{MODULE}.reconform_addon.bridge.animation")
    for src, _, action in pairs:
        act = action or getattr(src.animation_data, "action", None)
        if act is None:
            continue

        def refuse(_note, act=act):
            lo, hi = (int(round(v)) for v in act.frame_range)
            a, b = max(args.frames[0], lo), min(args.frames[1], hi)
            raise UserError(f"--frames {args.frames[0]} {args.frames[1]} reaches past the clip (Action "
                            f"'{act.name}' on '{src.name}' has frames {lo}..{hi}): give a range inside it, or add "
                            f"--clamp-frames to retarget frames {a}..{b}.")
        clip.resolve_range(act, animation.action_fcurves(src, act), args.frames[0], args.frames[1], say=refuse)


def _keep_in_place(rep, targets, log):
    """--root-motion in-place: each target's new clip loses its root bone's horizontal travel (after the
    metrics, which describe the motion as solved); the report says so."""
    import importlib
    export = importlib.import_module(f"{MODULE}.reconform_addon.bridge.export")
    first = rep["pairs"][0] if "pairs" in rep else rep
    rng = (first["frame_start"], first["frame_end"])
    for tgt in targets:
        bone = export.remove_root_motion(tgt, rng)
        note = (f"'{tgt.name}': root motion removed (bone '{bone}' kept in place horizontally; the metrics describe "
                "the motion before)" if bone else f"'{tgt.name}': no bone travels; nothing to keep in place")
        log(note)
        rep.setdefault("notes", []).append(note)


def run(args, log, outputs) -> dict:
    """Do the work in the current Blender session; the outputs are written all or none. Returns the report."""
    import bpy

    mod, repo = enable_addon()
    try:
        import importlib
        bridge = importlib.import_module(f"{MODULE}.reconform_addon.bridge")
        _open_scene(args, bpy, bridge, log)
        log("loading the retarget pipeline (PyTorch)")
        pipeline = importlib.import_module(f"{MODULE}.reconform_addon.pipeline")   # torch: after the files
        setup_file = importlib.import_module(f"{MODULE}.reconform_addon.setup_file")
        run_report = importlib.import_module(f"{MODULE}.reconform_addon.run_report")
        setup = setup_file.load_setup(args.setup) if args.setup else {}
        method = args.method or setup.get("method") or "copy_rotations"
        settings = dict(setup.get("settings") or {})
        if args.quality:
            settings["quality"] = args.quality
        if args.no_baseline_metrics:          # the command line wins over the set-up
            setup["baseline_metrics"] = False
        specs = pair_specs(args, setup)
        imported, pairs = {}, []
        for spec in specs:
            src = _resolve(spec["source"], "source", spec["source_armature"], bridge, log, imported)
            tgt = _resolve(spec["target"], "target", spec["target_armature"], bridge, log, imported)
            if src == tgt:
                raise bridge.BridgeError(f"Source and target are the same armature '{src.name}': pick two "
                                         "characters.")
            action = None
            if spec["action"]:
                action = bpy.data.actions.get(spec["action"])
                if action is None:
                    raise bridge.BridgeError(f"No Action named '{spec['action']}' (available: "
                                             f"{', '.join(sorted(a.name for a in bpy.data.actions)) or 'none'}).")
            _refuse_motion_as_target(spec, tgt, bridge)
            pairs.append((src, tgt, action))
        start, end = args.frames if args.frames else (None, None)
        if args.show_map or args.save_setup:
            import batch_setup   # tools/batch_setup.py
            batch_setup.show_map(args, setup, specs, pairs, setup_file, pipeline, log, outputs, MODULE)
            return None
        _check_frames(args, pairs, bridge)
        for spec, (src, tgt, action) in zip(specs, pairs):
            if args.name_template and not spec["name"]:
                act = action or getattr(src.animation_data, "action", None)
                spec["name"] = args.name_template.format(source=src.name, target=tgt.name, method=method,
                                                         action=act.name if act is not None else src.name)
        ground_entry = setup_file.setup_ground(setup)
        if args.ground or args.ground_file:   # the command line wins over the set-up
            ground_entry = dict(ground_entry, object=args.ground, file=args.ground_file)
            setup["ground"] = ground_entry
        ground = setup_file.resolve_ground(ground_entry, report=log) if ground_entry else None
        if args.window is not None:           # the command line wins over the set-up
            setup["window"] = {"frames": args.window, "overlap": args.window_overlap or max(2, args.window // 5)}
        if setup.get("window") and len(pairs) > 1:
            raise UserError("A 'window' set-up is for one pair: characters retargeted together are solved over the "
                            "whole clip.")
        window = setup_file.setup_window(setup)
        if window is not None and method != "reconform":
            log("note: 'window' applies to the reconform method; copy_rotations runs over the whole clip")
        if ground is not None and len(pairs) > 1:
            raise UserError("A ground object is for one character: several characters retargeted together stand on "
                            "the floor z = 0.")
        last = [0.0]

        def progress(f):
            if f - last[0] >= 0.25:
                last[0] = f
                log(f"progress {100 * f:.0f}%")

        if len(pairs) == 1:
            (src, tgt, action), = pairs
            own = setup_file.character_part_weights(specs[0], 0)
            if own:                  # one 'characters' entry with its own part weights: multiplied into the settings'
                settings["part_weights"] = setup_file.merged_part_weights(settings.get("part_weights"), own)
            log(f"retarget '{src.name}' -> '{tgt.name}' with {method}"
                + (f" on ground '{ground.name}'" if ground is not None else "")
                + (f" in windows of {window.length} frames sharing {window.overlap}"
                   if window is not None and method == "reconform" else ""))
            result = pipeline.retarget(src, tgt, method=method, action=action, frame_start=start, frame_end=end,
                                       settings=settings or None, setup=setup, name=specs[0]["name"], report=log,
                                       progress=progress, ground=ground)
        else:
            group = importlib.import_module(f"{MODULE}.reconform_addon.pipeline_group")
            bone_maps = [(_pair_bone_map(setup_file, setup, spec, "source", s.name),
                          _pair_bone_map(setup_file, setup, spec, "target", t.name))
                         for spec, (s, t, _) in zip(specs, pairs)]
            log(f"retarget {len(pairs)} characters together with {method}: "
                + ", ".join(f"'{s.name}' -> '{t.name}'" for s, t, _ in pairs))
            part_weights = [setup_file.character_part_weights(spec, k) for k, spec in enumerate(specs)]
            result = group.retarget_group(pairs, method=method, frame_start=start, frame_end=end,
                                          settings=settings or None, setup=setup, names=[s["name"] for s in specs],
                                          bone_maps=bone_maps, report=log, progress=progress,
                                          part_weights=part_weights)
        series = run_report.frame_series(result.outcome) if args.series else None
        if args.root_motion == "in-place":
            _keep_in_place(result.report, [t for _, t, _ in pairs], log)
        _write_outputs(args, outputs, result.report, [t for _, t, _ in pairs], log, series)
        return result.report
    finally:
        extension.disable_addon(REPO_NAME, repo)


class Interrupted(BaseException):
    """Ctrl+C (SIGINT) or SIGTERM arrived: stop, clean up, exit non-zero."""


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received = []


def _interrupt(signum, frame):
    """The first signal stops the run; later ones are ignored so that the clean-up always completes. (Raised
    inside an operator, Blender turns it into a RuntimeError: ``_received`` still tells what happened.)"""
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _received.append(signum)
    raise Interrupted(signum)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    args = parse_args(argv)
    console = batch_io.Console(verbose=args.verbose)
    t0 = time.perf_counter()

    def log(msg):
        if not args.quiet:
            console.out.write(f"[reconform {time.perf_counter() - t0:6.2f}s] {msg}\n")
    log.out = console.out   # the real stdout, for --show-map's table

    outputs = batch_io.Outputs(output_paths(args))
    user_dir = None
    rc = 0
    for sig in _SIGNALS:
        signal.signal(sig, _interrupt)
    try:
        batch_checks.check_arguments(args)   # paths, formats, frames: before Blender and PyTorch load
        outputs.check()   # before any work: an output that cannot be written fails in a second
        user_dir = extension.isolate_user_resources()
        import bpy  # noqa: F401
        run(args, log, outputs)
        log("done")
    except BaseException as ex:   # noqa: BLE001 - every ending gets one line and an exit status
        rc = _report_failure(ex, console)
    finally:
        for sig in _SIGNALS:   # a late Ctrl+C must not stop the clean-up
            signal.signal(sig, signal.SIG_IGN)
        outputs.discard()
        extension.remove_folder(user_dir)
        console.restore()
    return rc


def _report_failure(ex: BaseException, console) -> int:
    """One ``error:`` line for ``ex`` on the real stderr (a traceback first for an internal error); the exit
    status."""
    if _received:
        console.error(f"interrupted ({signal.Signals(_received[0]).name}): nothing was written")
        return 128 + int(_received[0])
    name = type(ex).__name__
    if name in ("ArgumentError", "BridgeError", "CoreError", "UserError", "OutputError"):
        console.error(str(ex).strip().splitlines()[0] if str(ex).strip() else name)
        return 1
    if isinstance(ex, SystemExit):
        return int(ex.code or 0)
    import traceback
    console.err.write("".join(traceback.format_exception(ex)))
    console.error(f"internal error ({name}: {ex}); please report it")
    return 3


if __name__ == "__main__":
    extension.exit_after(main)
