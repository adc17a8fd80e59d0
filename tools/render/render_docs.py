"""Render the pictures of docs/user_guide.md headless, from the project's own code and the shared characters.

    .venv/bin/python tools/render/render_docs.py [--out docs/img] [--assets ../shared/assets] [--frames 1 30]
    .venv/bin/python tools/render/render_docs.py --zoo          # docs/img/zoo.png, zoo_side.png only

Uses the Workbench engine (runs on the bpy wheel without a GPU in under a second per image; EEVEE took 132 s
for a cube here and Cycles needs many samples). Panels cannot be rendered headless, so the pictures show the
3D scenes: the characters, their key vertices (small spheres coloured by limb, the same colours as the
viewport gizmos) and the same frame before and after retargeting. Writes small PNGs (640 px wide).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPO_NAME = "reconform_docs"
MODULE = f"bl_ext.{REPO_NAME}.reconform"

if "bpy" not in sys.modules:
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_docs_"))

import bpy  # noqa: E402
import numpy as np  # noqa: E402

SOURCE_FILE = "mesh2motion_mannequin_ymca.glb"   # armature 'Rig', clip 'YMCA', 8,580 vertices
TARGET_FILE = "mh_male_heavy.glb"                 # armature 'mh_male_heavy_rig', big belly, A-pose


def enable_addon():
    sys.path.insert(0, str(ROOT / "tools"))
    import retarget
    return retarget.enable_addon(REPO_NAME)[0]


def mod(name):
    return importlib.import_module(f"{MODULE}.{name}")


def import_character(path, x=0.0):
    """Import a character file; move its armature to x (metres); returns the armature."""
    before = set(bpy.data.objects)
    bpy.ops.import_scene.gltf(filepath=str(path))
    new = [o for o in bpy.data.objects if o not in before]
    arm = next(o for o in new if o.type == 'ARMATURE')
    for o in new:
        if o.parent is None:
            o.location.x += x
    bpy.context.view_layer.update()
    return arm


def ground_offset(arm):
    """World z of the lowest vertex of the armature's meshes at the current frame."""
    dg = bpy.context.evaluated_depsgraph_get()
    zs = []
    for ob in mod("reconform_addon.bridge").find_meshes(arm):
        oe = ob.evaluated_get(dg)
        me = oe.to_mesh()
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3) @ np.array(oe.matrix_world)[:3, :3].T + np.array(oe.matrix_world)[:3, 3]
        zs.append(co[:, 2].min())
        oe.to_mesh_clear()
    return float(min(zs))


def setup_render(width=640, height=400):
    sc = bpy.context.scene
    sc.render.engine = 'BLENDER_WORKBENCH'
    sc.render.resolution_x, sc.render.resolution_y, sc.render.resolution_percentage = width, height, 100
    sc.render.image_settings.file_format = 'PNG'
    sc.render.image_settings.color_mode = 'RGB'
    sc.render.image_settings.compression = 90
    sh = sc.display.shading
    sh.light = 'STUDIO'
    sh.color_type = 'OBJECT'
    sh.show_shadows = True
    sh.show_cavity = True
    sh.cavity_type = 'WORLD'
    sc.display.shadow_focus = 0.3
    sc.world = sc.world or bpy.data.worlds.new("World")
    sc.world.color = (0.92, 0.92, 0.93)
    sh.background_type = 'WORLD'
    # ground plane
    me = bpy.data.meshes.new("ground")
    s = 200.0   # large enough that a low camera never sees its far edge
    me.from_pydata([(-s, -s, 0), (s, -s, 0), (s, s, 0), (-s, s, 0)], [], [(0, 1, 2, 3)])
    g = bpy.data.objects.new("ground", me)
    g.color = (0.8, 0.8, 0.82, 1)
    sc.collection.objects.link(g)


def camera(center, width, height_z, elevation=8.0, yaw=0.0):
    """An orthographic camera looking at ``center`` from the front (-Y), framing width x height metres."""
    import math

    from mathutils import Euler, Vector

    sc = bpy.context.scene
    cam = sc.camera
    if cam is None:
        cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam"))
        sc.collection.objects.link(cam)
        sc.camera = cam
    cam.data.type = 'ORTHO'
    aspect = sc.render.resolution_x / sc.render.resolution_y
    cam.data.ortho_scale = max(width, height_z * aspect) * 1.08
    rot = Euler((math.radians(90 - elevation), 0, math.radians(yaw)))
    cam.rotation_euler = rot
    back = rot.to_matrix() @ Vector((0, 0, 10))
    cam.location = Vector(center) + back
    cam.data.clip_end = 100


def colour_character(arm, rgba):
    for ob in mod("reconform_addon.bridge").find_meshes(arm):
        ob.color = rgba


def render(path):
    bpy.context.scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
    print(f"wrote {path} ({os.path.getsize(path) / 1024:.0f} KiB)", flush=True)


def memoise_transfer():
    """Transfer key vertices once per body: the same mesh imported twice (or read again by Retarget) reuses
    the first result (keyed by its rest vertices, bone map and N)."""
    import hashlib

    kv = mod("core.keyverts")
    original = kv.transfer_keyverts
    memo = {}

    def transfer(character, n=41, locked=None, **kw):
        h = hashlib.sha1(np.ascontiguousarray(character.mesh.rest_verts).tobytes())
        h.update(repr(sorted(character.bone_map.items())).encode())
        key = (h.hexdigest(), n, locked is None)
        if key not in memo or locked is not None or kw:
            memo[key] = original(character, n=n, locked=locked, **kw)
        return memo[key]

    kv.transfer_keyverts = transfer


def keyvert_spheres(arm, character, radius=0.025):
    """Small UV spheres on the character's key vertices in its rest pose, coloured like the gizmos."""
    gz = mod("reconform_addon.gizmos")
    M = character.skeleton.object_matrix
    pts = character.mesh.rest_verts[character.keyverts.vertex_ids]
    pts = pts @ M[:3, :3].T + M[:3, 3]
    made = []
    for p, limb in zip(pts, character.keyverts.limbs):
        bpy.ops.mesh.primitive_uv_sphere_add(radius=radius, segments=12, ring_count=8, location=tuple(p))
        sp = bpy.context.active_object
        sp.color = (*gz.limb_color(limb), 1.0)
        made.append(sp)
    return made


def render_zoo(out: pathlib.Path, assets: pathlib.Path, frames=(1, 60), show=45, quality="FAST"):
    """docs/img/zoo.png: the generated zoo (tools/zoo.py: rigid-part robot, IK-footed game rig, big-headed creature,
    a body with a sword, a shirt and eyes) walking the Bandai-Namco walk after a ReConForM retarget, frame
    ``show``, seen from the front and from the side."""
    sys.path.insert(0, str(ROOT))
    from tools import zoo

    bpy.ops.wm.read_homefile(use_empty=True)
    setup_render(960, 420)
    arms = zoo.build_zoo()
    bridge, pipeline = mod("reconform_addon.bridge"), mod("reconform_addon.pipeline")
    src = bridge.find_armature(bridge.import_file(str(assets / "motions" / "NC_bandai_walk_normal_001.bvh"),
                                                  report=lambda m: None))
    colours = [(0.55, 0.62, 0.75, 1), (0.6, 0.75, 0.55, 1), (0.75, 0.62, 0.8, 1), (0.85, 0.66, 0.52, 1)]
    for (key, arm), rgba in zip(arms.items(), colours):
        t = time.perf_counter()
        res = pipeline.retarget(src, arm, method="reconform", frame_start=frames[0], frame_end=frames[1],
                                settings={"quality": quality.lower()})
        print(f"zoo {key}: {time.perf_counter() - t:.1f} s; {res.report['verdict']}", flush=True)
        for ob in bpy.data.objects:
            if ob.type == 'MESH' and ob.name.startswith(arm.name):
                ob.color = rgba
    bpy.context.scene.frame_set(show)
    camera((1.95, -0.6, 0.9), 5.8, 2.1)
    render(out / "zoo.png")
    camera((1.95, -0.6, 0.9), 5.8, 2.1, yaw=90.0)
    render(out / "zoo_side.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "img")
    ap.add_argument("--assets", type=pathlib.Path, default=ROOT.parent / "shared" / "assets")
    ap.add_argument("--frames", nargs=2, type=int, default=None, metavar=("START", "END"),
                    help="frames retargeted (default: the whole clip; the zoo: 1 60)")
    ap.add_argument("--show-frame", type=int, default=None,
                    help="frame shown before/after (default: the last of the frames, the mannequin's 'A' with its "
                         "hands together above the head; the zoo: 45)")
    ap.add_argument("--quality", default="FAST", choices=("FAST", "BALANCED", "BEST"))
    ap.add_argument("--zoo", action="store_true", help="render only the generated zoo (docs/img/zoo*.png)")
    args = ap.parse_args(argv)
    chars = args.assets / "characters"
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    enable_addon()
    if args.zoo:
        render_zoo(args.out, args.assets, args.frames or (1, 60), args.show_frame or 45, args.quality)
        print(f"total {time.perf_counter() - t0:.0f} s")
        return 0
    memoise_transfer()
    bpy.ops.wm.read_homefile(use_empty=True)
    setup_render()

    # 1. the two characters at rest --------------------------------------------------------------------
    src = import_character(chars / SOURCE_FILE, x=-0.6)
    tgt = import_character(chars / TARGET_FILE, x=0.6)
    src.data.pose_position = 'REST'   # both in their rest pose (the mannequin's clip is left alone)
    bpy.context.scene.frame_set(1)
    colour_character(src, (0.55, 0.62, 0.75, 1))
    colour_character(tgt, (0.85, 0.66, 0.52, 1))
    camera((0, 0, 0.95), 2.6, 2.1)
    render(args.out / "characters.png")

    # 2. key vertices on both (41-vertex template, OT transfer), rest pose ------------------------------
    pipeline = mod("reconform_addon.pipeline")
    spheres = []
    for arm in (src, tgt):
        t = time.perf_counter()
        ch = pipeline.prepare_character(arm, keyvert_count=41)
        print(f"key vertices on '{arm.name}': {time.perf_counter() - t:.1f} s", flush=True)
        spheres += keyvert_spheres(arm, ch)
    render(args.out / "keyverts.png")
    camera((0.6, 0, 1.15), 1.2, 1.15, elevation=5.0)   # close-up of the target's upper body and hands
    render(args.out / "keyverts_closeup.png")
    for sp in spheres:
        bpy.data.objects.remove(sp)
    src.data.pose_position = 'POSE'

    # 3. the same frame: source, copy rotations, ReConForM --------------------------------------------
    bpy.ops.wm.read_homefile(use_empty=True)
    setup_render()
    src = import_character(chars / SOURCE_FILE, x=-1.0)
    tgt_copy = import_character(chars / TARGET_FILE, x=0.0)
    tgt_rc = import_character(chars / TARGET_FILE, x=1.0)
    colour_character(src, (0.55, 0.62, 0.75, 1))
    colour_character(tgt_copy, (0.75, 0.75, 0.72, 1))
    colour_character(tgt_rc, (0.85, 0.66, 0.52, 1))
    s = bpy.context.scene.reconform
    s.source = src
    frames = args.frames or tuple(int(f) for f in src.animation_data.action.frame_range)
    s.use_custom_range, s.frame_start, s.frame_end = True, *frames
    s.quality = args.quality
    for tgt, method in ((tgt_copy, 'COPY_ROTATIONS'), (tgt_rc, 'RECONFORM')):
        s.target, s.method = tgt, method
        t = time.perf_counter()
        assert bpy.ops.reconform.retarget() == {'FINISHED'}
        print(f"{method}: {time.perf_counter() - t:.1f} s, {s.status}", flush=True)
    metrics = {m.name: (m.value, m.reference) for m in s.metrics}
    bpy.context.scene.frame_set(args.show_frame or frames[1])
    camera((0, 0, 1.0), 3.3, 2.3)
    render(args.out / "before_after.png")
    print("metrics of the ReConForM solve (value, copy-rotations):")
    for k in ("floor_pen_mean", "self_pen_mean", "grounded_f1", "locked_f1", "contact_f1", "jerk_mean"):
        if k in metrics:
            print(f"  {k}: {metrics[k][0]:.4g} ({metrics[k][1]:.4g})")
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    import extension
    extension.exit_after(main, sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
