"""Render the terrain pictures of docs/solver.md "Terrain" from `make demo`'s output, headless (bpy wheel).

    .venv/bin/python tools/render/render_terrain.py [--blend demo_output/output.blend] [--out docs/img]
        [--frames 60 100 140]

For each walker of the demo's grounds ('StairsClimber' on 'Stairs', 'RampWalker' on 'Ramp'), the same frames
are rendered from the side, the walker and its ground alone, with copy-rotations' Action (`DemoWalk to <walker>
(copy rotations)`, which walks on at flat height) and with the ReConForM result (`DemoWalk to <walker>`), one PNG
per walker and frame pair:
`terrain_<ground>_<frame>.png` (left copy-rotations, right ReConForM; Workbench, orthographic).
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
if "bpy" not in sys.modules:
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_terrain_"))

import bpy  # noqa: E402
import numpy as np  # noqa: E402

WALKERS = {"Stairs": "StairsClimber", "Ramp": "RampWalker"}


def _setup(width=480, height=560):
    sc = bpy.context.scene
    sc.render.engine = 'BLENDER_WORKBENCH'
    sc.render.resolution_x, sc.render.resolution_y, sc.render.resolution_percentage = width, height, 100
    sc.render.image_settings.file_format = 'PNG'
    sh = sc.display.shading
    sh.light, sh.color_type, sh.show_cavity, sh.show_shadows = 'STUDIO', 'OBJECT', True, True
    sc.world = sc.world or bpy.data.worlds.new("World")
    sc.world.color = (0.93, 0.93, 0.94)
    sh.background_type = 'WORLD'
    cam = bpy.data.objects.new("terrain_cam", bpy.data.cameras.new("terrain_cam"))
    sc.collection.objects.link(cam)
    sc.camera = cam
    cam.data.type = 'ORTHO'
    return cam


def _body(arm):
    return [o for o in bpy.data.objects if o.type == 'MESH' and any(
        m.type == 'ARMATURE' and m.object == arm for m in o.modifiers)]


def _feet_centre(arm):
    dg = bpy.context.evaluated_depsgraph_get()
    pts = []
    for ob in _body(arm):
        oe = ob.evaluated_get(dg)
        me = oe.to_mesh()
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3) @ np.array(oe.matrix_world)[:3, :3].T + np.array(oe.matrix_world)[:3, 3]
        oe.to_mesh_clear()
        pts.append(co)
    co = np.concatenate(pts)
    low = co[co[:, 2] < co[:, 2].min() + 0.6]
    return low.mean(0)


def render_pair(ground, frame, out_dir, cam):
    """Left: copy-rotations; right: ReConForM; both from the side (the camera looks along +X). Only the walker,
    its body and its ground are rendered: the demo's other characters and grounds stand between the camera and
    some walkers."""
    from mathutils import Euler, Vector

    arm = bpy.data.objects[WALKERS[ground]]
    sc = bpy.context.scene
    keep = {arm.name, ground, cam.name} | {o.name for o in _body(arm)}
    for ob in bpy.data.objects:
        ob.hide_render = ob.name not in keep
    paths = []
    for suffix in (" (copy rotations)", ""):      # the demo's names: pipeline.result_action_name
        name = f"DemoWalk to {arm.name}{suffix}"
        act = bpy.data.actions.get(name)
        if act is None:
            raise SystemExit(f"error: no Action '{name}' in the file: run `make demo` (reconform) first")
        arm.animation_data.action = act
        if hasattr(arm.animation_data, "action_slot") and len(act.slots):
            arm.animation_data.action_slot = act.slots[0]
        sc.frame_set(frame)
        c = _feet_centre(arm)
        cam.data.ortho_scale = 1.9
        cam.rotation_euler = Euler((math.radians(84), 0.0, math.radians(-90)))
        cam.location = Vector((c[0], c[1], c[2] + 0.55)) + cam.rotation_euler.to_matrix() @ Vector((0, 0, 8))
        for ob in _body(arm):
            ob.color = (0.85, 0.45, 0.3, 1) if suffix else (0.3, 0.55, 0.85, 1)
        path = out_dir / f"_{ground}_{frame}_{'copy' if suffix else 'reconform'}.png"
        sc.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        paths.append(path)
    imgs = [bpy.data.images.load(str(p)) for p in paths]
    w, h = imgs[0].size
    joined = np.concatenate([np.asarray(im.pixels[:]).reshape(h, w, 4) for im in imgs], axis=1)
    out = bpy.data.images.new(f"{ground}_{frame}", 2 * w, h)
    out.pixels = joined.ravel().tolist()
    target = out_dir / f"terrain_{ground.lower()}_{frame}.png"
    out.filepath_raw = str(target)
    out.file_format = 'PNG'
    out.save()
    for p in paths:
        os.remove(p)
    print(f"wrote {target}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blend", default=str(ROOT / "demo_output" / "output.blend"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--frames", nargs="+", type=int, default=[60, 100, 140])
    ap.add_argument("--grounds", nargs="+", default=list(WALKERS), choices=list(WALKERS))
    args = ap.parse_args(argv)
    bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend), load_ui=False)
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cam = _setup()
    for ground in args.grounds:
        for frame in args.frames:
            render_pair(ground, frame, out_dir, cam)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    import extension
    extension.exit_after(main)
