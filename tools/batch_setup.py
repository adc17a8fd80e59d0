"""--show-map and --save-setup of the batch command (tools/retarget.py): what a run would use, seen and edited
before it runs. For each character: its bone map (the set-up's, else the detected one: {canonical name: bone
name}), the bones nothing maps, and which of its meshes form the body and which are left out (clothing, eyes,
props) and why: the same readings a retarget makes (``core.character.complete.resolve_bone_map``,
``core.character.meshparts.choose_body``). --save-setup writes them as a set-up (docs/bridge.md "Set-up file")
to edit and pass back with --setup."""

from __future__ import annotations

import importlib
import json


def character_setup(arm, bone_map, mesh_choice, pipeline, module: str) -> dict:
    """{'armature', 'rig_type', 'bone_map', 'unmapped', 'body', 'left_out'} of armature ``arm``: ``bone_map``
    (None: detected) fitted to it, and its body meshes (``mesh_choice``: {mesh name: bool}, a set-up's)."""
    complete = importlib.import_module(f"{module}.core.character.complete")
    meshparts = importlib.import_module(f"{module}.core.character.meshparts")
    spec = pipeline.read_character(arm, bone_map, mesh_choice=mesh_choice)
    fitted, rig_type, _ = complete.resolve_bone_map(spec.skeleton, spec.bone_map)
    mapped = set(fitted.values())
    body, left = [], {}
    if spec.mesh is not None:
        if len(spec.mesh.part_names) > 1 or spec.mesh_choice:
            choice = meshparts.choose_body(spec.skeleton, spec.mesh, fitted, spec.mesh_choice)
            body, left = list(choice.used), dict(choice.left_out)
        else:
            body = list(spec.mesh.part_names)
    return {"armature": arm.name, "rig_type": rig_type, "bone_map": fitted,
            "unmapped": [n for n in spec.skeleton.names if n not in mapped], "body": body, "left_out": left}


def describe(role: str, spec: str, info: dict) -> list:
    """Lines for one character."""
    lines = [f"{role} '{info['armature']}' ({spec}): {len(info['bone_map'])} bones mapped, rig type "
             f"{info['rig_type']}"]
    width = max((len(k) for k in info["bone_map"]), default=0)
    lines += [f"  {canonical:<{width}}  <- {bone}" for canonical, bone in info["bone_map"].items()]
    if info["unmapped"]:
        lines.append("  not mapped: " + ", ".join(info["unmapped"]))
    if info["body"] or info["left_out"]:
        lines.append("  body meshes: " + (", ".join(info["body"]) or "none"))
        for name, why in info["left_out"].items():
            lines.append(f"  left out: {name} ({why})")
    else:
        lines.append("  no mesh (a skeleton only)")
    return lines


def _role_entry(info: dict) -> dict:
    entry = {"bone_map": info["bone_map"]}
    if info["left_out"]:
        entry["exclude_meshes"] = sorted(info["left_out"])
    return entry


def setup_document(setup: dict, specs, infos, method: str) -> dict:
    """The set-up to save: the loaded ``setup`` with each character's bone map and left-out meshes. One pair:
    ``source`` / ``target`` entries (run again with the same --source/--target and --setup); several: a
    ``characters`` list holding the pairs (run again with --setup alone)."""
    doc = {k: v for k, v in setup.items() if k not in ("source", "target", "bone_maps", "characters")}
    doc["method"] = method
    if len(specs) == 1:
        doc["source"], doc["target"] = _role_entry(infos[0][0]), _role_entry(infos[0][1])
        return doc
    doc["characters"] = []
    left = {"source": set(), "target": set()}
    for spec, (src, tgt) in zip(specs, infos):
        entry = {k: spec[k] for k in ("source", "target", "source_armature", "target_armature", "action", "name",
                                      "part_weights") if spec.get(k)}
        entry["source_armature"], entry["target_armature"] = src["armature"], tgt["armature"]
        entry["source_bone_map"], entry["target_bone_map"] = {"bone_map": src["bone_map"]}, {"bone_map":
                                                                                             tgt["bone_map"]}
        left["source"] |= set(src["left_out"])
        left["target"] |= set(tgt["left_out"])
        doc["characters"].append(entry)
    for role, names in left.items():
        if names:
            doc[role] = {"exclude_meshes": sorted(names)}
    return doc


def show_map(args, setup, specs, pairs, setup_file, pipeline, log, outputs, module: str) -> None:
    """Print every character's bone map and body meshes (stdout, also under --quiet: it is what was asked for);
    with --save-setup write them as a set-up (through ``outputs``: all or nothing)."""
    import os

    bodyparts = importlib.import_module(f"{module}.reconform_addon.bridge.bodyparts")
    method = args.method or setup.get("method") or "copy_rotations"
    infos, lines = [], []
    srcs, tgts = [s for s, _, _ in pairs], [t for _, t, _ in pairs]
    choices = {role: bodyparts.setup_choices(setup.get(role) or {}, arms)
               for role, arms in (("source", srcs), ("target", tgts))}
    for k, (spec, (src, tgt, _)) in enumerate(zip(specs, pairs)):
        pair = []
        for role, arm in (("source", src), ("target", tgt)):
            bone_map = (setup_file.setup_bone_map({role: spec[f"{role}_bone_map"]}, role, arm.name)
                        if spec.get(f"{role}_bone_map") else setup_file.setup_bone_map(setup, role, arm.name))
            info = character_setup(arm, bone_map, choices[role][k] or None, pipeline, module)
            pair.append(info)
            lines += describe(role, spec[role], info)
        infos.append(tuple(pair))
    if args.show_map or not args.quiet:
        print("\n".join(lines), file=_stdout(log))
    if args.save_setup:
        doc = setup_document(setup, specs, infos, method)
        with open(outputs.stage(args.save_setup), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        outputs.commit()
        again = ("the same --source/--target and " if len(specs) == 1 else "") + f"--setup {args.save_setup}"
        log(f"wrote {os.path.abspath(args.save_setup)}: edit it, then retarget with {again}")


def _stdout(log):
    """The command's real stdout (Blender's own output is captured: ``batch_io.Console``)."""
    return getattr(log, "out", None)
