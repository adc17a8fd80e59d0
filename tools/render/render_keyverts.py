"""Render the key-vertex template pictures of docs/keyverts.md (headless, bpy wheel, Workbench).

    .venv/bin/python tools/render/render_keyverts.py        # writes docs/img/keyverts_41.png, keyverts_96.png

Each picture: the template body in T-pose from the front, the back, the left side and below (palms and soles
face down in the T-pose), with one sphere per key vertex coloured by limb.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_render_bl_"))

COLORS = {"torso": (0.85, 0.25, 0.2), "head": (0.95, 0.8, 0.1), "left_arm": (0.2, 0.5, 0.95),
          "right_arm": (0.1, 0.75, 0.85), "left_hand": (0.55, 0.25, 0.9), "right_hand": (0.9, 0.3, 0.75),
          "left_leg": (0.2, 0.75, 0.3), "right_leg": (0.6, 0.85, 0.2), "left_foot": (0.95, 0.55, 0.1),
          "right_foot": (0.6, 0.4, 0.2)}
VIEWS = {"front": ((0, -6, 0), (90, 0, 0)), "back": ((0, 6, 0), (90, 0, 180)), "side": ((6, 0, 0), (90, 0, 90)),
         "below": ((0, 0, -6), (180, 0, 0))}


def _mesh_object(bpy, name, verts, faces, color):
    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(v) for v in verts], [], [tuple(f) for f in faces])
    for p in me.polygons:
        p.use_smooth = True
    ob = bpy.data.objects.new(name, me)
    ob.color = (*color, 1.0)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _sphere(center, r):
    t = (1 + 5 ** 0.5) / 2
    v = np.array([(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
                  (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)], float)
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2), (10, 7, 6),
         (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10),
         (8, 6, 7), (9, 8, 1)]
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return center + r * v, f


def render(n, path):
    import bpy
    import mathutils

    from core.keyverts import load_template
    tpl = load_template(n)
    bpy.ops.wm.read_homefile(use_empty=True)
    sc = bpy.context.scene
    m = tpl.mesh
    _mesh_object(bpy, "template", m.rest_verts, m.face_indices.reshape(-1, 4), (0.8, 0.8, 0.8))
    r = 0.018
    for limb, color in COLORS.items():
        vs, fs = [], []
        for k in np.nonzero(np.array(tpl.keyverts.limbs) == limb)[0]:
            p = m.rest_verts[tpl.keyverts.vertex_ids[k]] + m.rest_normals[tpl.keyverts.vertex_ids[k]] * r * 0.4
            sv, sf = _sphere(p, r)
            fs += [tuple(i + 12 * len(vs) for i in f) for f in sf]
            vs.append(sv)
        if vs:
            _mesh_object(bpy, f"kv_{limb}", np.concatenate(vs), fs, color)
    cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam"))
    sc.collection.objects.link(cam)
    sc.camera = cam
    cam.data.type = 'ORTHO'
    sc.render.engine = 'BLENDER_WORKBENCH'
    sc.display.shading.light = 'STUDIO'
    sc.display.shading.color_type = 'OBJECT'
    sc.render.resolution_x, sc.render.resolution_y = 700, 700
    lo, hi = m.rest_verts.min(0), m.rest_verts.max(0)
    c = (lo + hi) / 2
    tiles = []
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="reconform_kvimg_"))
    for view, (off, rot) in VIEWS.items():
        cam.location = mathutils.Vector(c) + mathutils.Vector(off)
        cam.rotation_euler = [np.radians(a) for a in rot]
        cam.data.ortho_scale = float(max(hi - lo)) * 1.05 if view != "side" else float(hi[2] - lo[2]) * 1.05
        sc.render.filepath = str(tmp / f"{view}.png")
        bpy.ops.render.render(write_still=True)
        im = bpy.data.images.load(sc.render.filepath)
        tiles.append(np.array(im.pixels[:]).reshape(im.size[1], im.size[0], 4))
    top = np.concatenate(tiles[:2], 1)
    bottom = np.concatenate(tiles[2:], 1)
    big = np.concatenate([bottom, top], 0)     # Blender images are stored bottom row first
    out = bpy.data.images.new(f"kv{n}", big.shape[1], big.shape[0], alpha=True)
    out.pixels = big.ravel()
    out.filepath_raw = str(path)
    out.file_format = 'PNG'
    out.save()
    print(f"wrote {path}")


def main():
    img = ROOT / "docs" / "img"
    img.mkdir(parents=True, exist_ok=True)
    for n in (41, 96):
        render(n, img / f"keyverts_{n}.png")
    return 0


if __name__ == "__main__":
    from tools.extension import exit_after
    exit_after(main)
