"""Import character / motion files into the current scene and find armatures by name."""

from __future__ import annotations

import json
import os
import re
import struct

import bpy
import numpy as np

from .errors import BridgeError

SUPPORTED = (".blend", ".fbx", ".glb", ".gltf", ".bvh", ".obj")

#: Length units tried (in this order) for skeleton-only BVH/FBX files that are not in metres:
#: centimetres, inches, the CMU ASF unit (1/0.45 inch), millimetres.
UNIT_CANDIDATES = (("cm", 0.01), ("in", 0.0254), ("CMU ASF unit", 0.0254 / 0.45), ("mm", 0.001))
#: A skeleton counts as "in metres" when its rest-pose size (largest bounding-box side of its non-root
#: joints, in world units) lies in this range.
METRE_RANGE = (0.5, 3.0)
#: A unit candidate is accepted when it brings the size into this (adult human) range.
HUMAN_RANGE = (1.0, 2.5)


def gltf_frame_rate(path: str):
    """Key rate (keys per second) of the animations in a .glb/.gltf file, or None when it has none.

    glTF keys are times in seconds; Blender's importer turns them into frames at the *scene's* frame rate, so
    a clip keyed at 24 fps imported into a 120 fps scene comes in as 5× as many interpolated frames. The rate
    is read from the animation samplers' input accessors (``count`` keys between ``min`` and ``max``, which
    the format requires): the densest sampler's (count − 1) / (max − min), among samplers with three keys or
    more. Unreadable files, and files whose channels have two keys at most, give None.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(20)
            if head[:4] == b"glTF":                          # binary: 12-byte header, then the JSON chunk
                length, kind = struct.unpack("<I4s", head[12:20])
                if kind != b"JSON":
                    return None
                doc = json.loads(f.read(length))
            else:
                f.seek(0)
                doc = json.loads(f.read())
    except (OSError, ValueError, struct.error):
        return None
    accessors = doc.get("accessors", [])
    rates = []
    for anim in doc.get("animations", []):
        for sampler in anim.get("samplers", []):
            try:
                acc = accessors[sampler["input"]]
                span = float(acc["max"][0]) - float(acc["min"][0])
                if acc["count"] >= 3 and span > 0:     # two keys (a held channel) say nothing of a rate
                    rates.append((acc["count"] - 1) / span)
            except (KeyError, IndexError, TypeError, ValueError):
                continue
    return max(rates) if rates else None


def _set_scene_rate(rate: float) -> None:
    """Scene frame rate = ``rate`` exactly (fps an integer, fps_base absorbing the rest: 29.97 = 30 / 1.001)."""
    r = bpy.context.scene.render
    r.fps = max(1, int(round(rate)))
    r.fps_base = r.fps / rate


def _run_importer(path: str, ext: str, bvh_fps: bool):
    if ext == ".fbx":
        return bpy.ops.import_scene.fbx(filepath=path)
    if ext in (".glb", ".gltf"):   # no bone-shape Icosphere: only what the file holds comes in
        op = bpy.ops.import_scene.gltf
        extra = {"disable_bone_shape": True} if "disable_bone_shape" in op.get_rna_type().properties else {}
        return op(filepath=path, **extra)
    if ext == ".bvh":
        return bpy.ops.import_anim.bvh(filepath=path, update_scene_fps=bvh_fps, update_scene_duration=False)
    if ext == ".obj":   # meshes only (a ground object); Y up in the file, Z up in Blender
        return bpy.ops.wm.obj_import(filepath=path)
    raise AssertionError(ext)


_FBX_BINARY = b"Kaydara FBX Binary  \x00"
_BLEND_MAGIC = (b"BLENDER", b"\x1f\x8b", b"\x28\xb5\x2f\xfd")   # plain, gzip, zstd
_BVH_FRAMES = re.compile(rb"^\s*MOTION\s+Frames:\s*(\S+)\s+Frame\s+Time:\s*(\S+)", re.M | re.I)


def check_file(path: str, ext: str) -> None:
    """Raise BridgeError ``Cannot import '<path>': <reason>`` when the file is plainly not what its extension
    says (empty, another format, a BVH without hierarchy or frames), before Blender's importer runs on it (the
    importers answer such files with a traceback)."""
    def fail(reason):
        raise BridgeError(f"Cannot import '{path}': {reason}.")
    with open(path, "rb") as f:
        head = f.read(64)
    if not head.strip():
        fail("the file is empty")
    if ext == ".blend" and not head.startswith(_BLEND_MAGIC):
        fail("not a .blend file")
    if ext == ".glb" and head[:4] != b"glTF":
        fail("not a binary glTF file (it does not start with 'glTF')")
    if ext == ".fbx" and not head.startswith(_FBX_BINARY):
        fail("not a binary FBX file" + (" (ASCII FBX, which Blender does not read: export it as binary FBX)"
                                        if b"FBX" in head else ""))
    if ext == ".gltf":
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (UnicodeDecodeError, ValueError) as ex:
            fail(f"not a glTF file (not JSON: {ex})")
        if not isinstance(doc, dict) or "asset" not in doc:
            fail("not a glTF file (no 'asset' entry)")
    if ext == ".bvh":
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            fail("not a BVH file (binary data; a BVH file is text that starts with HIERARCHY)")
        words = text.split(None, 1)
        if not words or words[0].upper() != "HIERARCHY":
            fail("not a BVH file (it does not start with HIERARCHY)")
        m = _BVH_FRAMES.search(data)
        if m is None:
            fail("the BVH file has no MOTION section with 'Frames:' and 'Frame Time:' (cut short?)")
        try:
            frames, dt = int(m.group(1)), float(m.group(2))
        except ValueError:
            fail("the BVH file's 'Frames:' or 'Frame Time:' is not a number")
        if frames < 1 or not dt > 0:
            fail(f"the BVH file has {frames} frames of {dt:g} s: nothing to retarget")


def importer_reason(ex: Exception) -> str:
    """The useful line of an importer's exception: its last ``SomeError: message`` line (Blender wraps a Python
    importer's traceback into the RuntimeError it raises), else its last line."""
    lines = [ln.strip() for ln in str(ex).strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception): ", ln):
            return ln
    lines = [ln for ln in lines if not ln.startswith("Location:")]
    return lines[-1] if lines else type(ex).__name__


def _append_blend(path: str) -> None:
    with bpy.data.libraries.load(path, link=False) as (src, dst):
        dst.objects = list(src.objects)
    coll = bpy.data.collections.new(os.path.splitext(os.path.basename(path))[0])
    bpy.context.scene.collection.children.link(coll)
    for ob in dst.objects:
        if ob is not None:
            coll.objects.link(ob)


def skeleton_size(arm_obj) -> float:
    """Largest side of the world-space bounding box of the rest joints (heads and tails), root bones excluded
    (BVH/FBX roots often sit at the origin far from the body)."""
    bones = [b for b in arm_obj.data.bones if b.parent is not None] or list(arm_obj.data.bones)
    pts = np.array([tuple(b.head_local) for b in bones] + [tuple(b.tail_local) for b in bones], dtype=np.float64)
    M = np.array(arm_obj.matrix_world, dtype=np.float64)
    pts = pts @ M[:3, :3].T + M[:3, 3]
    return float((pts.max(0) - pts.min(0)).max())


def auto_unit_scale(arm_obj, report=print):
    """Scale a skeleton-only armature imported in another length unit so that it is in metres.

    Rule: when its size (``skeleton_size``) is outside ``METRE_RANGE``, the first unit of
    ``UNIT_CANDIDATES`` that brings it inside ``HUMAN_RANGE`` is applied to the object's ``delta_scale`` (so
    motion keys, including keyed object scale, are untouched). Returns the factor applied (1.0 when none).
    """
    size = skeleton_size(arm_obj)
    lo, hi = METRE_RANGE
    if lo <= size <= hi or size <= 0:
        return 1.0
    for unit, factor in UNIT_CANDIDATES:
        if HUMAN_RANGE[0] <= size * factor <= HUMAN_RANGE[1]:
            # delta_scale: importers (FBX) key the object's own scale, which would undo a change to .scale
            arm_obj.delta_scale = tuple(s * factor for s in arm_obj.delta_scale)
            bpy.context.view_layer.update()
            report(f"'{arm_obj.name}': skeleton size {size:.4g} looks like {unit}; object scale x{factor:.6g} "
                   f"gives {size * factor:.3f} m.")
            return factor
    report(f"'{arm_obj.name}': skeleton size {size:.4g} matches no known unit; left as is.")
    return 1.0


def import_file(path, unit_scale: str = 'auto', set_scene_fps: bool = True, report=print) -> list:
    """Import a .blend (append all its objects), .fbx, .glb/.gltf, .bvh or .obj file into the current scene.

    Args:
        path: file path.
        unit_scale: 'auto' rescales skeleton-only armatures from BVH/FBX files that are not in metres
            (``auto_unit_scale``); 'none' keeps the importer's result.
        set_scene_fps: True: the scene takes the file's frame rate (BVH through its importer; glTF from its
            animation's key rate, ``gltf_frame_rate``, as its importer samples at the scene's rate; FBX
            importers set it themselves). False: the scene keeps its rate whatever the importer does (a
            retarget's target: the source's rate governs the result); a file whose own rate differs is
            reported.
    Returns:
        the new objects. Raises BridgeError naming the file when it is missing, empty, not of its extension's
        format or unreadable (``check_file``, then the importer's own error); a failed import leaves no new
        objects behind and the scene's frame rate as it was.
    """
    path = os.path.abspath(os.fspath(path))
    ext = os.path.splitext(path)[1].lower()
    if ext not in SUPPORTED:
        raise BridgeError(f"Cannot import '{path}': unsupported file type '{ext}' (use .blend, .fbx, .glb, .gltf, "
                          ".bvh, or .obj for a ground mesh).")
    if not os.path.isfile(path):
        raise BridgeError(f"Cannot import '{path}': file not found.")
    check_file(path, ext)
    if bpy.context.object is not None and bpy.context.object.mode != 'OBJECT':
        bpy.ops.object.mode_set(mode='OBJECT')
    before = set(bpy.data.objects)
    render = bpy.context.scene.render
    rate_before = (render.fps, render.fps_base)
    try:
        if ext == ".blend":
            _append_blend(path)
        else:
            rate = gltf_frame_rate(path) if set_scene_fps and ext in (".glb", ".gltf") else None
            if rate is not None and abs(render.fps / render.fps_base - rate) > 1e-3:
                report(f"'{os.path.basename(path)}': animation keyed at {rate:g} fps; scene frame rate set to it "
                       f"(was {render.fps / render.fps_base:g})")
                _set_scene_rate(rate)
            result = _run_importer(path, ext, set_scene_fps)
            if 'FINISHED' not in result:
                raise RuntimeError("the importer cancelled")
    except Exception as ex:  # importers raise RuntimeError / OSError / their own errors
        for ob in set(bpy.data.objects) - before:
            bpy.data.objects.remove(ob)
        render.fps, render.fps_base = rate_before
        raise BridgeError(f"Cannot import '{path}': {importer_reason(ex)}") from None
    if not set_scene_fps and (render.fps, render.fps_base) != rate_before:
        report(f"'{os.path.basename(path)}' is set at {render.fps / render.fps_base:g} fps; the scene keeps "
               f"{rate_before[0] / rate_before[1]:g} fps (its own animation plays at that rate)")
        render.fps, render.fps_base = rate_before
    new = sorted(set(bpy.data.objects) - before, key=lambda o: o.name)
    if not new:
        raise BridgeError(f"Cannot import '{path}': the file contains no objects.")
    if unit_scale == 'auto' and ext in (".bvh", ".fbx"):
        from .read import find_meshes
        for ob in new:
            if ob.type == 'ARMATURE' and ob.parent is None and not find_meshes(ob):
                auto_unit_scale(ob, report=report)
    return new


def find_armature(objects=None, name=None):
    """The armature called ``name`` (a mesh name gives the armature deforming it), or the only armature
    among ``objects`` (the scene's objects when None). Raises BridgeError with what to do otherwise."""
    pool = list(objects) if objects is not None else list(bpy.context.scene.objects)
    if name:
        ob = next((o for o in pool if o.name == name), None)
        if ob is None:
            ob = bpy.data.objects.get(name) if objects is None else None
        if ob is None:
            arms = ", ".join(sorted(o.name for o in pool if o.type == 'ARMATURE')) or "none"
            raise BridgeError(f"No object named '{name}' (armatures available: {arms}).")
        if ob.type == 'ARMATURE':
            return ob
        if ob.type == 'MESH':
            for m in ob.modifiers:
                if m.type == 'ARMATURE' and m.object is not None:
                    return m.object
            if ob.parent is not None and ob.parent.type == 'ARMATURE':
                return ob.parent
        raise BridgeError(f"Object '{name}' is a {ob.type.lower()} with no armature: pick an armature.")
    arms = [o for o in pool if o.type == 'ARMATURE']
    if len(arms) == 1:
        return arms[0]
    if not arms:
        raise BridgeError("No armature found: import or select a character with an armature.")
    raise BridgeError(f"Several armatures found ({', '.join(sorted(o.name for o in arms))}): name the one to use.")
