"""Headless retargeting from the command line.

Runs the same way in a Blender binary and with the bpy wheel::

    blender -b --factory-startup --python-exit-code 1 --python tools/retarget.py -- ARGS
    .venv/bin/python tools/retarget.py ARGS

Examples (docs/bridge.md has more)::

    python tools/retarget.py --source walk.bvh --target hero.glb --out out.blend --report report.json
    python tools/retarget.py --blend scene.blend --source Mocap --target Hero --frames 1 120 \\
        --method reconform --setup setup.json --export out.fbx --export out.glb
    # several characters retargeted together (one world frame; one new Action per target)
    python tools/retarget.py --method reconform --source lead.bvh --target tall.glb \\
        --source follow.bvh --target short.glb --out couple.blend --report couple.json

Exit status: 0 on success, 1 with one line ``error: <reason>`` on stderr for bad input (missing object or
file, armature without a mesh when the method needs one, nothing mapped, unreadable file), 2 for bad
arguments, 3 for an internal error (traceback printed). Bad input writes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import extension  # noqa: E402  (tools/extension.py: the one helper that enables the extension)
REPO_NAME = "reconform_batch"
MODULE = f"bl_ext.{REPO_NAME}.reconform"


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
    p.add_argument("--name", action="append", default=[], help="name of the new Action (one per target, or none)")
    p.add_argument("--out", help="write the result .blend here")
    p.add_argument("--export", action="append", default=[], help="export the target (.fbx, .glb, .gltf, .bvh); "
                   "repeatable")
    p.add_argument("--report", help="write a report (.json or .txt)")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    args = p.parse_args(argv)
    for path in args.export:
        if os.path.splitext(path)[1].lower() not in (".fbx", ".glb", ".gltf", ".bvh"):
            p.error(f"--export {path}: use a .fbx, .glb, .gltf or .bvh path")
    if args.report and os.path.splitext(args.report)[1].lower() not in (".json", ".txt"):
        p.error(f"--report {args.report}: use a .json or .txt path")
    if args.out and not args.out.lower().endswith(".blend"):
        p.error(f"--out {args.out}: use a .blend path")
    if len(args.source) != len(args.target):
        p.error(f"{len(args.source)} --source but {len(args.target)} --target: give one target per source")
    for opt in ("source_armature", "target_armature", "action", "name"):
        vals = getattr(args, opt)
        if vals and len(vals) != len(args.source):
            p.error(f"--{opt.replace('_', '-')} is given {len(vals)} times for {len(args.source)} pairs: give it once "
                    "per pair, or not at all")
    return args


def enable_addon(repo_name: str = REPO_NAME):
    """The extension enabled as ``bl_ext.<repo_name>.reconform`` (``tools/extension.py``); (module, repo)."""
    return extension.enable_addon(repo_name)


def _resolve(spec, role, arm_name, bridge, log, imported=None):
    """An armature from a file path (imported, once per path: ``imported`` keeps {path: objects}) or an object
    name in the open scene."""
    ext = os.path.splitext(spec)[1].lower()
    if ext in bridge.io.SUPPORTED or os.path.sep in spec:
        key = os.path.abspath(spec)
        if imported is None or key not in imported:
            log(f"importing {role} '{spec}'")
            objs = bridge.import_file(spec, report=log)
            if imported is not None:
                imported[key] = objs
        return bridge.find_armature(imported[key] if imported is not None else objs, arm_name)
    return bridge.find_armature(None, arm_name or spec)


def pair_specs(args, setup) -> list:
    """The source→target pairs to retarget: the command line's (--source/--target repeated), else the set-up's
    ``characters`` list. Each is a dict with source, target, source_armature, target_armature, action, name,
    source_bone_map, target_bone_map (None where not given)."""
    keys = ("source", "target", "source_armature", "target_armature", "action", "name", "source_bone_map",
            "target_bone_map")
    chars = setup.get("characters")
    if args.source and chars:
        raise UserError("Pairs are given both on the command line and in the set-up's 'characters': use one.")
    if args.source:
        n = len(args.source)
        opt = lambda vals, k: vals[k] if vals else None  # noqa: E731
        return [dict(source=args.source[k], target=args.target[k], source_armature=opt(args.source_armature, k),
                     target_armature=opt(args.target_armature, k), action=opt(args.action, k), name=opt(args.name, k),
                     source_bone_map=None, target_bone_map=None) for k in range(n)]
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


def _export(path, arms, motion_range, log):
    """Export the target armatures ``arms`` (one, or all of a group) with their meshes."""
    import bpy

    arms = arms if isinstance(arms, (list, tuple)) else [arms]
    ext = os.path.splitext(path)[1].lower()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = motion_range
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    keep = list(arms) + [m for m in bpy.data.objects if m.type == 'MESH' and any(m.parent == arm or any(
        md.type == 'ARMATURE' and md.object == arm for md in m.modifiers) for arm in arms)]
    for ob in keep:
        if ob.name in bpy.context.view_layer.objects:
            ob.select_set(True)
    arm = arms[0]
    bpy.context.view_layer.objects.active = arm
    t = time.perf_counter()
    if ext == ".fbx":
        res = bpy.ops.export_scene.fbx(filepath=path, use_selection=True, bake_anim=True, add_leaf_bones=False,
                                       bake_anim_use_all_actions=False, bake_anim_use_nla_strips=False)
    elif ext in (".glb", ".gltf"):
        res = bpy.ops.export_scene.gltf(filepath=path, export_format='GLB' if ext == ".glb" else 'GLTF_SEPARATE',
                                         use_selection=True, export_animations=True)
    else:
        res = bpy.ops.export_anim.bvh(filepath=path, frame_start=motion_range[0], frame_end=motion_range[1])
    if 'FINISHED' not in res or not os.path.isfile(path):
        raise RuntimeError(f"export to '{path}' failed")
    log(f"exported {path} ({time.perf_counter() - t:.2f} s)")


def _group_text_report(rep) -> str:
    lines = [f"method: {rep['method']}, {rep['characters']} characters retargeted together"]
    for p in rep["pairs"]:
        lines.append("")
        lines.append(_text_report(p).rstrip("\n"))
    lines.append("")
    pm, ref = rep.get("partner_metrics") or {}, rep.get("partner_reference_metrics") or {}
    if pm:
        lines.append("partner metrics:" + ("  (copy-rotations in brackets)" if ref else ""))
        lines += [f"  {k}: {v}" + (f"  [{ref[k]}]" if k in ref else "") for k, v in pm.items()]
    lines.append("timings: " + ", ".join(f"{k} {v:.3f}" for k, v in rep["timings"].items()))
    lines += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines) + "\n"


def _text_report(rep) -> str:
    if "pairs" in rep:
        return _group_text_report(rep)
    lines = [f"method: {rep['method']}",
             f"source: {rep['source']['armature']} action {rep['source_action']} "
             f"({rep['source']['mapped']}/{rep['source']['bones']} bones mapped)",
             f"target: {rep['target']['armature']} ({rep['target']['mapped']}/{rep['target']['bones']} bones mapped)",
             f"new action: {rep['action']}, frames {rep['frame_start']}..{rep['frame_end']} at {rep['fps']:g} fps"]
    if rep.get("timings"):
        lines.append("timings: " + ", ".join(f"{k} {v:.3f}" for k, v in rep["timings"].items()))
    if rep.get("metrics"):
        ref = rep.get("reference_metrics") or {}
        lines.append("metrics:" + ("  (copy-rotations in brackets)" if ref else ""))
        lines += [f"  {k}: {v}" + (f"  [{ref[k]}]" if k in ref else "") for k, v in rep["metrics"].items()]
    if rep.get("conflicts"):
        lines.append("conflicts (most severe first):")
        lines += [f"  {c['body_part']}: {c['terms'][0]} / {c['terms'][1]}, cosine {c['cosine']:.2f}, frames "
                  f"{c['frames'][0]}-{c['frames'][1]}" for c in rep["conflicts"]]
    if rep["source"]["unmapped"]:
        lines.append("unmapped source bones: " + ", ".join(rep["source"]["unmapped"]))
    if rep["target"]["unmapped"]:
        lines.append("unmapped target bones: " + ", ".join(rep["target"]["unmapped"]))
    lines += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines) + "\n"


def _pair_bone_map(pipeline, setup, spec, role, arm_name):
    """A pair's bone map: its own ``<role>_bone_map`` entry, else the set-up's for the role or armature."""
    own = spec.get(f"{role}_bone_map")
    if own:
        return pipeline.setup_bone_map({role: own}, role, arm_name)
    return pipeline.setup_bone_map(setup, role, arm_name)


def run(args, log) -> dict:
    """Do the work in the current Blender session. Returns the report dict."""
    import bpy

    mod, repo = enable_addon()
    try:
        bridge = importlib.import_module(f"{MODULE}.reconform_addon.bridge")
        pipeline = importlib.import_module(f"{MODULE}.reconform_addon.pipeline")
        if args.blend:
            if not os.path.isfile(args.blend):
                raise bridge.BridgeError(f"Cannot open '{os.path.abspath(args.blend)}': file not found.")
            log(f"opening {args.blend}")
            try:
                bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend), load_ui=False)
            except RuntimeError as ex:
                raise bridge.BridgeError(f"Cannot open '{os.path.abspath(args.blend)}': "
                                         f"{str(ex).strip().splitlines()[-1]}") from None
        setup = pipeline.load_setup(args.setup) if args.setup else {}
        method = args.method or setup.get("method") or "copy_rotations"
        settings = dict(setup.get("settings") or {})
        if args.quality:
            settings["quality"] = args.quality
        specs = pair_specs(args, setup)
        imported = {}
        pairs = []
        for spec in specs:
            src = _resolve(spec["source"], "source", spec["source_armature"], bridge, log, imported)
            tgt = _resolve(spec["target"], "target", spec["target_armature"], bridge, log, imported)
            if src == tgt:
                raise bridge.BridgeError(f"Source and target are the same armature '{src.name}': pick two characters.")
            action = None
            if spec["action"]:
                action = bpy.data.actions.get(spec["action"])
                if action is None:
                    raise bridge.BridgeError(f"No Action named '{spec['action']}' (available: "
                                             f"{', '.join(sorted(a.name for a in bpy.data.actions)) or 'none'}).")
            pairs.append((src, tgt, action))
        start, end = args.frames if args.frames else (None, None)
        last = [0.0]

        def progress(f):
            if f - last[0] >= 0.25:
                last[0] = f
                log(f"progress {100 * f:.0f}%")

        if len(pairs) == 1:
            (src, tgt, action), = pairs
            log(f"retarget '{src.name}' -> '{tgt.name}' with {method}")
            result = pipeline.retarget(src, tgt, method=method, action=action, frame_start=start, frame_end=end,
                                       settings=settings or None, setup=setup, name=specs[0]["name"], report=log,
                                       progress=progress)
            rep = result.report
            rng = (rep["frame_start"], rep["frame_end"])
        else:
            group = importlib.import_module(f"{MODULE}.reconform_addon.pipeline_group")
            bone_maps = [(_pair_bone_map(pipeline, setup, spec, "source", s.name),
                          _pair_bone_map(pipeline, setup, spec, "target", t.name))
                         for spec, (s, t, _) in zip(specs, pairs)]
            log(f"retarget {len(pairs)} characters together with {method}: "
                + ", ".join(f"'{s.name}' -> '{t.name}'" for s, t, _ in pairs))
            result = group.retarget_group(pairs, method=method, frame_start=start, frame_end=end,
                                          settings=settings or None, setup=setup, names=[s["name"] for s in specs],
                                          bone_maps=bone_maps, report=log, progress=progress)
            rep = result.report
            rng = (rep["pairs"][0]["frame_start"], rep["pairs"][0]["frame_end"])
        for path in args.export:
            _export(path, [t for _, t, _ in pairs], rng, log)
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            scene = bpy.context.scene
            scene.frame_start, scene.frame_end = rng
            bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.out), copy=True)
            log(f"saved {args.out}")
        if args.report:
            os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
            with open(args.report, "w", encoding="utf-8") as f:
                if args.report.lower().endswith(".json"):
                    json.dump(rep, f, indent=2)
                else:
                    f.write(_text_report(rep))
            log(f"report {args.report}")
        return rep
    finally:
        extension.disable_addon(REPO_NAME, repo)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    args = parse_args(argv)
    if "bpy" not in sys.modules:  # bpy wheel: keep the user's Blender settings out of it
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_bl_"))
    import bpy  # noqa: F401

    t0 = time.perf_counter()

    def log(msg):
        if not args.quiet:
            print(f"[reconform {time.perf_counter() - t0:6.2f}s] {msg}", flush=True)

    try:
        run(args, log)
    except Exception as ex:
        name = type(ex).__name__
        if name in ("BridgeError", "CoreError", "UserError"):
            print(f"error: {str(ex).strip().splitlines()[0] if str(ex).strip() else name}", file=sys.stderr,
                  flush=True)
            return 1
        import traceback
        traceback.print_exc()
        print(f"error: internal error ({name}: {ex}); please report it", file=sys.stderr, flush=True)
        return 3
    log("done")
    return 0


def _exit(rc: int):
    """Exit with ``rc``. With the bpy wheel, after torch was loaded and the glTF exporter ran, the interpreter
    hangs at shutdown (seen with bpy 4.5.15 + torch 2.13): files are closed and flushed, so leave at once."""
    import bpy

    sys.stdout.flush()
    sys.stderr.flush()
    if not bpy.app.binary_path:
        os._exit(rc)
    sys.exit(rc)


if __name__ == "__main__":
    _exit(main())
