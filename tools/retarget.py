"""Headless retargeting from the command line.

Runs the same way in a Blender binary and with the bpy wheel::

    blender -b --factory-startup --python-exit-code 1 --python tools/retarget.py -- ARGS
    .venv/bin/python tools/retarget.py ARGS

Examples (docs/bridge.md has more)::

    python tools/retarget.py --source walk.bvh --target hero.glb --out out.blend --report report.json
    python tools/retarget.py --blend scene.blend --source Mocap --target Hero --frames 1 120 \\
        --method reconform --setup setup.json --export out.fbx --export out.glb

Exit status: 0 on success, 1 with one line ``error: <reason>`` on stderr for bad input (missing object or
file, armature without a mesh when the method needs one, nothing mapped, unreadable file), 2 for bad
arguments, 3 for an internal error (traceback printed). Bad input writes nothing.
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--source", required=True, help="source: file (.blend/.fbx/.glb/.gltf/.bvh) or object name")
    p.add_argument("--target", required=True, help="target: file or object name")
    p.add_argument("--source-armature", help="armature name inside the source file when it has several")
    p.add_argument("--target-armature", help="armature name inside the target file when it has several")
    p.add_argument("--action", help="source Action name (default: the one playing on the source)")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="inclusive frame range")
    p.add_argument("--method", choices=("copy_rotations", "reconform"), default=None,
                   help="retarget method (default: the set-up's, else copy_rotations)")
    p.add_argument("--quality", choices=("fast", "balanced", "best"), help="solver preset (reconform)")
    p.add_argument("--setup", help="JSON set-up: bone maps per character and settings (reusable across clips)")
    p.add_argument("--name", help="name of the new Action")
    p.add_argument("--out", help="write the result .blend here")
    p.add_argument("--export", action="append", default=[], help="export the target (.fbx, .glb, .gltf, .bvh); "
                   "repeatable")
    p.add_argument("--report", help="write a report (.json or .txt)")
    p.add_argument("--series", help="write per-frame series (each foot's height: source, copy-rotations, result) "
                   "as .json, for the library report (tools/library.py)")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    args = p.parse_args(argv)
    for path in args.export:
        if os.path.splitext(path)[1].lower() not in (".fbx", ".glb", ".gltf", ".bvh"):
            p.error(f"--export {path}: use a .fbx, .glb, .gltf or .bvh path")
    if args.report and os.path.splitext(args.report)[1].lower() not in (".json", ".txt"):
        p.error(f"--report {args.report}: use a .json or .txt path")
    if args.series and not args.series.lower().endswith(".json"):
        p.error(f"--series {args.series}: use a .json path")
    if args.out and not args.out.lower().endswith(".blend"):
        p.error(f"--out {args.out}: use a .blend path")
    return args


def enable_addon(repo_name: str = REPO_NAME):
    """The extension enabled as ``bl_ext.<repo_name>.reconform`` (``tools/extension.py``); (module, repo)."""
    return extension.enable_addon(repo_name)


def _resolve(spec, role, arm_name, bridge, log):
    """An armature from a file path (imported) or an object name in the open scene."""
    ext = os.path.splitext(spec)[1].lower()
    if ext in bridge.io.SUPPORTED or os.path.sep in spec:
        log(f"importing {role} '{spec}'")
        objs = bridge.import_file(spec, report=log)
        return bridge.find_armature(objs, arm_name)
    return bridge.find_armature(None, arm_name or spec)


def _export(path, arm, motion_range, log):
    import bpy

    ext = os.path.splitext(path)[1].lower()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = motion_range
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    keep = [arm] + [m for m in bpy.data.objects if m.type == 'MESH' and (m.parent == arm or any(
        md.type == 'ARMATURE' and md.object == arm for md in m.modifiers))]
    for ob in keep:
        if ob.name in bpy.context.view_layer.objects:
            ob.select_set(True)
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


def _text_report(rep) -> str:
    lines = [f"method: {rep['method']}",
             f"source: {rep['source']['armature']} action {rep['source_action']} "
             f"({rep['source']['mapped']}/{rep['source']['bones']} bones mapped)",
             f"target: {rep['target']['armature']} ({rep['target']['mapped']}/{rep['target']['bones']} bones mapped)",
             f"new action: {rep['action']}, frames {rep['frame_start']}..{rep['frame_end']} at {rep['fps']:g} fps",
             "timings: " + ", ".join(f"{k} {v:.3f}" for k, v in rep["timings"].items())]
    if rep.get("metrics"):
        ref = rep.get("reference_metrics") or {}
        lines.append("metrics:" + ("  (copy-rotations in brackets)" if ref else ""))
        lines += [f"  {k}: {v}" + (f"  [{ref[k]}]" if k in ref else "") for k, v in rep["metrics"].items()]
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
    lines += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines) + "\n"


def run(args, log) -> dict:
    """Do the work in the current Blender session. Returns the report dict."""
    import bpy

    mod, repo = enable_addon()
    try:
        import importlib
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
        src = _resolve(args.source, "source", args.source_armature, bridge, log)
        tgt = _resolve(args.target, "target", args.target_armature, bridge, log)
        if src == tgt:
            raise bridge.BridgeError(f"Source and target are the same armature '{src.name}': pick two characters.")
        action = None
        if args.action:
            action = bpy.data.actions.get(args.action)
            if action is None:
                raise bridge.BridgeError(f"No Action named '{args.action}' (available: "
                                         f"{', '.join(sorted(a.name for a in bpy.data.actions)) or 'none'}).")
        start, end = args.frames if args.frames else (None, None)
        log(f"retarget '{src.name}' -> '{tgt.name}' with {method}")
        last = [0.0]

        def progress(f):
            if f - last[0] >= 0.25:
                last[0] = f
                log(f"progress {100 * f:.0f}%")

        result = pipeline.retarget(src, tgt, method=method, action=action, frame_start=start, frame_end=end,
                                   settings=settings or None, setup=setup, name=args.name, report=log,
                                   progress=progress)
        rep = result.report
        rng = (rep["frame_start"], rep["frame_end"])
        for path in args.export:
            _export(path, tgt, rng, log)
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
        if args.series:
            os.makedirs(os.path.dirname(os.path.abspath(args.series)), exist_ok=True)
            with open(args.series, "w", encoding="utf-8") as f:
                json.dump(pipeline.frame_series(result.outcome), f)
            log(f"series {args.series}")
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
