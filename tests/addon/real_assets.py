"""Shared helpers for the real-data tests (../shared/assets): file lists and cached skeleton reads."""

import functools
import importlib
import pathlib

CHARACTERS = ("mesh2motion_mannequin_ymca.glb", "mh_female_average.glb", "mh_female_average_cmurig.fbx",
              "mh_female_curvy_mixamorig.glb", "mh_female_thin_tall.glb", "mh_male_average.glb",
              "mh_male_heavy.glb", "mh_male_muscular.glb", "mh_teen_girl.glb", "orangejuice_male_base_mesh.glb")
MOTIONS = ("NC_bandai_kick_normal_001.bvh", "NC_bandai_slash_normal_001.bvh", "NC_bandai_walk_giant_001.bvh",
           "NC_bandai_walk_normal_001.bvh", "cmu_01_01_playground_jumps.fbx", "cmu_07_01_walk.fbx",
           "cmu_09_11_run.fbx", "cmu_salsa_60_01_lead.bvh", "cmu_salsa_60_05_lead.bvh", "cmu_salsa_60_15_lead.bvh",
           "cmu_salsa_61_01_follow.bvh", "cmu_salsa_61_05_follow.bvh", "cmu_salsa_61_15_follow.bvh")


def path_of(assets: pathlib.Path, name: str) -> pathlib.Path:
    return assets / ("characters" if name in CHARACTERS else "motions") / name


def mod(addon, name):
    """A submodule of the enabled extension (``core.bonemap``, ``reconform_addon.bridge``, ...)."""
    return importlib.import_module(f"{addon.__name__}.{name}")


def import_armature(addon, assets, name):
    """Import one asset into the current scene; returns its armature object."""
    bridge = mod(addon, "reconform_addon.bridge")
    objs = bridge.import_file(str(path_of(assets, name)), report=lambda msg: None)
    return bridge.find_armature(objs)


@functools.lru_cache(maxsize=None)
def _skeleton_cache():
    return {}


def read_skeleton_cached(addon, assets, name):
    """core.Skeleton of an asset, imported once per test session (into a fresh empty scene)."""
    cache = _skeleton_cache()
    if name not in cache:
        import bpy
        bpy.ops.wm.read_homefile(use_empty=True)
        arm = import_armature(addon, assets, name)
        cache[name] = mod(addon, "reconform_addon.bridge").read_skeleton(arm)
    return cache[name]


def prepared_pair(addon, assets, source: str, target: str, frames: tuple) -> tuple:
    """A shared source and target read into an empty scene through the add-on (41 key vertices; the source gets a
    fitted body) and the source clip's ``frames`` [first, stop): (source, clip, target, copy-rotations of the clip
    on the clip's frames)."""
    import bpy
    bpy.ops.wm.read_homefile(use_empty=True)
    pipeline, bridge = mod(addon, "reconform_addon.pipeline"), mod(addon, "reconform_addon.bridge")
    src_arm = import_armature(addon, assets, source)
    tgt_arm = import_armature(addon, assets, target)
    src = pipeline.prepare_character(src_arm, keyvert_count=41, fit_body=True)
    tgt = pipeline.prepare_character(tgt_arm, keyvert_count=41)
    motion = bridge.read_motion(src_arm, src.skeleton).slice(*frames)
    init = mod(addon, "core.pipeline.copy_rotations").copy_rotations(src, motion, tgt)
    init = mod(addon, "core.types").Motion(init.rotations, init.locations, motion.fps, motion.frame_start)
    return src, motion, tgt, init
