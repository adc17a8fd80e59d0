"""Render the bench's worst frames headless: a target character twice, side by side, copy-rotations' motion on the
left and ReConForM's on the right, at the frames ``tools/bench/worst_frames.py`` picked, with a label in the
picture (the case, the frame, the metric's value for both methods). tools/render/render_docs.py's Workbench
set-up, camera and colours; the camera is framed on the two bodies' skinned meshes at each frame.

    .venv/bin/python tools/render/render_worst.py JOB.json

JOB.json (written by ``worst_frames.render``): {"width": 960, "height": 540, "items": [{"target": path of the
target's file, "motions": .npz with init_rotations, init_locations, ours_rotations, ours_locations, fps,
frame_start, "bones": the scene skeleton's bone names, "frames": [{"frame": scene frame, "path": PNG,
"title": line(s), "left": label, "right": label, "marks": [a world point or None per side]}]}]}. Prints
``WROTE path`` per picture. The bench leaves its job in bench_output/worst_frames/.motions/job.json.
"""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

GAP = 0.5                                         #: metres between the two bodies' boxes
LEFT_COLOUR = (0.75, 0.75, 0.72, 1)               #: copy-rotations (render_docs' before_after.png)
RIGHT_COLOUR = (0.85, 0.66, 0.52, 1)              #: ReConForM
TEXT_COLOUR = (0.05, 0.05, 0.05, 1)
MARK_COLOUR = (1.0, 0.0, 0.0, 1)                  #: the deepest point inside the body, drawn in front
MARK_RADIUS = 0.025                               #: metres


def _import(rd, path):
    """(armature, the new parentless objects) of ``path`` imported into the current scene."""
    bridge = rd.mod("reconform_addon.bridge")
    objs = bridge.import_file(path, report=lambda m: None)
    return bridge.find_armature(objs), [o for o in objs if o.parent is None]


def _bounds(rd, arm):
    """(min, max) world corners of the armature's evaluated meshes at the current frame."""
    import numpy as np
    bpy = rd.bpy
    dg = bpy.context.evaluated_depsgraph_get()
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for ob in rd.mod("reconform_addon.bridge").find_meshes(arm):
        oe = ob.evaluated_get(dg)
        me = oe.to_mesh()
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        mw = np.array(oe.matrix_world)
        co = co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3]
        oe.to_mesh_clear()
        if len(co):
            lo, hi = np.minimum(lo, co.min(0)), np.maximum(hi, co.max(0))
    return lo, hi


def _text(bpy, name, parent, body, size, x, y, align='LEFT'):
    """A text object in the camera's frame (camera-local x, y at 1 m in front of it), facing it."""
    cu = bpy.data.curves.new(name, type='FONT')
    cu.body, cu.size, cu.align_x = body, size, align
    ob = bpy.data.objects.new(name, cu)
    ob.color = TEXT_COLOUR
    ob.parent = parent
    ob.location = (x, y, -1.0)
    ob.display.show_shadows = False                  # Workbench: no shadow of the text on the floor
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _mark(bpy, where):
    """A small sphere at ``where`` drawn in front of everything (the point lies inside the body)."""
    me = bpy.data.meshes.new("mark")
    import bmesh
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=8, radius=MARK_RADIUS)
    bm.to_mesh(me)
    bm.free()
    ob = bpy.data.objects.new("mark", me)
    ob.location = tuple(where)
    ob.color = MARK_COLOUR
    ob.show_in_front = True
    ob.display.show_shadows = False
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _fit(bpy, ob, width):
    """Shrink the text object ``ob`` to at most ``width`` (camera-local metres) wide."""
    bpy.context.view_layer.update()
    if ob.dimensions.x > width:
        ob.data.size *= width / ob.dimensions.x


def render_item(rd, item, width, height) -> list:
    """Render one case's frames; returns the paths written."""
    import numpy as np
    from mathutils import Vector
    bpy = rd.bpy
    Motion = rd.mod("core.types").Motion
    bridge = rd.mod("reconform_addon.bridge")
    bpy.ops.wm.read_homefile(use_empty=True)
    rd.setup_render(width, height)
    data = np.load(item["motions"])
    fps, start = float(data["fps"]), int(data["frame_start"])
    sides = []
    for role, colour in (("init", LEFT_COLOUR), ("ours", RIGHT_COLOUR)):
        arm, roots = _import(rd, item["target"])
        skel = bridge.read_skeleton(arm)
        if list(skel.names) != list(item["bones"]):
            raise SystemExit(f"error: {item['target']}: the armature's bones are not the motion's")
        bridge.write_motion(arm, skel, Motion(data[f"{role}_rotations"], data[f"{role}_locations"], fps, start),
                            f"worst frame ({role})")
        rd.colour_character(arm, colour)
        sides.append((arm, roots, [tuple(o.location) for o in roots]))
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = start, start + len(data["init_rotations"]) - 1
    written = []
    for fr in item["frames"]:
        for _, roots, home in sides:                         # both back where the file put them
            for o, loc in zip(roots, home):
                o.location = loc
        sc.frame_set(int(fr["frame"]))
        (lo_a, hi_a), (lo_b, hi_b) = (_bounds(rd, arm) for arm, _, _ in sides)
        # the right body beside the left one, at the same depth
        shift = np.array([hi_a[0] + GAP - lo_b[0], 0.5 * (lo_a[1] + hi_a[1] - lo_b[1] - hi_b[1]), 0.0])
        for o in sides[1][1]:
            o.location = tuple(np.asarray(o.location) + shift)
        lo, hi = np.minimum(lo_a, lo_b + shift), np.maximum(hi_a, hi_b + shift)
        lo[2] = min(lo[2], 0.0)                              # the floor in view
        w, h = hi[0] - lo[0], hi[2] - lo[2]
        # room above the bodies for the title and below for the labels
        rd.camera((0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1]), 0.5 * (lo[2] + hi[2]) + 0.06 * h), w + 0.2,
                  1.25 * h + 0.1, elevation=6.0)
        cam = sc.camera
        bpy.context.view_layer.update()
        scale = cam.data.ortho_scale                          # the frame's width (landscape) in metres
        half_w, half_h = 0.5 * scale, 0.5 * scale * height / width
        inv = cam.matrix_world.inverted()
        size = 0.028 * scale
        made = [_text(bpy, "title", cam, fr["title"], size, -half_w + 0.4 * size, half_h - 1.3 * size)]
        _fit(bpy, made[0], 2 * half_w - 0.8 * size)
        pitch = 0.5 * (hi_b[0] + lo_b[0] - hi_a[0] - lo_a[0]) + shift[0]    # between the bodies' centres
        for (arm, _, _), label, (l_, h_) in zip(sides, (fr["left"], fr["right"]),
                                                ((lo_a, hi_a), (lo_b + shift, hi_b + shift))):
            foot = inv @ Vector((0.5 * (l_[0] + h_[0]), 0.5 * (l_[1] + h_[1]), lo[2]))
            made.append(_text(bpy, "label", cam, label, 1.1 * size, foot.x, -half_h + 0.5 * size, 'CENTER'))
            _fit(bpy, made[-1], 0.9 * pitch)
        for mark, offset in zip(fr.get("marks") or (), (np.zeros(3), shift)):
            if mark is not None:
                made.append(_mark(bpy, np.asarray(mark) + offset))
        bpy.context.view_layer.update()
        rd.render(fr["path"])
        print(f"WROTE {fr['path']}", flush=True)
        written.append(fr["path"])
        for ob in made:
            data, pool = ob.data, bpy.data.curves if ob.type == 'FONT' else bpy.data.meshes
            bpy.data.objects.remove(ob)
            pool.remove(data)
    return written


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    job = json.loads(pathlib.Path(args[0]).read_text(encoding="utf-8"))
    import render_docs as rd
    rd.enable_addon()
    for item in job["items"]:
        for fr in item["frames"]:
            pathlib.Path(fr["path"]).parent.mkdir(parents=True, exist_ok=True)
        render_item(rd, item, int(job.get("width", 960)), int(job.get("height", 540)))
    return 0


if __name__ == "__main__":
    from extension import exit_after
    exit_after(main)
