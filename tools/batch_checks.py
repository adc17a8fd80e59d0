"""The batch command's checks of its own arguments and files, before Blender and PyTorch are loaded
(tools/retarget.py): a typo in a path, an export format that does not exist, frames in the wrong order or a run
that would write nothing fail in a fraction of a second, with one line naming the option.

Imports neither bpy nor torch (tests/addon/test_batch_errors.py checks it)."""

from __future__ import annotations

import json
import os

#: file types the command reads a character or a motion from (a name without one of these is an object name)
CHARACTER_FILES = (".blend", ".fbx", ".glb", ".gltf", ".bvh")
#: file types --ground-file reads
GROUND_FILES = CHARACTER_FILES + (".obj",)
#: file types --export writes (reconform_addon/bridge/export.py FORMATS)
EXPORT_FILES = (".fbx", ".glb", ".gltf", ".bvh")
#: the placeholder of an --export path that writes one file per character
PER_CHARACTER = "{target}"
#: placeholders of --name-template
NAME_FIELDS = ("source", "target", "action", "method")


class ArgumentError(Exception):
    """An argument or input file the command refuses before any work (one line, exit status 1)."""


def is_file_spec(spec: str) -> bool:
    """True when a --source/--target value names a file (a known extension or a folder in it), not an object."""
    return os.path.splitext(spec)[1].lower() in CHARACTER_FILES or os.sep in spec


def _need_file(opt: str, path: str, kinds) -> None:
    ext = os.path.splitext(path)[1].lower()
    if ext not in kinds:
        raise ArgumentError(f"{opt} {path}: unsupported file type '{ext or '(none)'}' (use {', '.join(kinds)}).")
    if not os.path.isfile(path):
        raise ArgumentError(f"{opt} {path}: file not found" + (" (it is a folder)" if os.path.isdir(path) else "")
                            + ".")


def _setup_pairs(path: str) -> int:
    """How many pairs a set-up's 'characters' list gives (0 when none; the set-up is read again, fully checked,
    once Blender is loaded)."""
    try:
        with open(path, encoding="utf-8") as f:
            setup = json.load(f)
    except ValueError as ex:
        raise ArgumentError(f"--setup {path}: not a JSON file ({ex}).") from None
    except OSError as ex:
        raise ArgumentError(f"--setup {path}: cannot read it ({ex.strerror or ex}).") from None
    if not isinstance(setup, dict):
        raise ArgumentError(f"--setup {path}: must be a JSON object (docs/bridge.md \"Set-up file\").")
    chars = setup.get("characters")
    return len(chars) if isinstance(chars, list) else 0


def check_name_template(template: str) -> None:
    """Refuse a --name-template with an unknown placeholder or an unbalanced brace."""
    try:
        template.format(**{k: "x" for k in NAME_FIELDS})
    except KeyError as ex:
        raise ArgumentError(f"--name-template {template}: unknown placeholder {{{ex.args[0]}}} (use "
                            + ", ".join("{" + k + "}" for k in NAME_FIELDS) + ").") from None
    except (ValueError, IndexError) as ex:
        raise ArgumentError(f"--name-template {template}: {ex} (placeholders are "
                            + ", ".join("{" + k + "}" for k in NAME_FIELDS) + ").") from None


def check_arguments(args) -> None:
    """Every check that needs neither Blender nor PyTorch; raises ArgumentError naming the option."""
    writes = args.out or args.export or args.report or args.series
    looks = args.show_map or args.save_setup
    if not writes and not looks:
        raise ArgumentError("nothing to write: give --out RESULT.blend, --export FILE (.fbx, .glb, .gltf, .bvh) "
                            "or --report REPORT.json (or --show-map to see the bone maps).")
    if looks and writes:
        raise ArgumentError("--show-map and --save-setup only look at the characters: leave out --out, --export, "
                            "--report and --series (run again with --setup to retarget).")
    for path in args.export:
        ext = os.path.splitext(path)[1].lower()
        if ext not in EXPORT_FILES:
            raise ArgumentError(f"--export {path}: unsupported format '{ext or '(none)'}' (use "
                                f"{', '.join(EXPORT_FILES)}).")
    if args.save_setup and not args.save_setup.lower().endswith(".json"):
        raise ArgumentError(f"--save-setup {args.save_setup}: use a .json path.")
    if args.frames and args.frames[0] > args.frames[1]:
        raise ArgumentError(f"--frames {args.frames[0]} {args.frames[1]}: START is after END; give START <= END.")
    if args.name_template:
        check_name_template(args.name_template)
    if args.blend:
        _need_file("--blend", args.blend, (".blend",))
    pairs = len(args.source)
    if args.setup:
        _need_file("--setup", args.setup, (".json",))
        pairs = pairs or _setup_pairs(args.setup)
    for opt, specs in (("--source", args.source), ("--target", args.target)):
        for spec in specs:
            if is_file_spec(spec):
                _need_file(opt, spec, CHARACTER_FILES)
    if args.ground_file:
        _need_file("--ground-file", args.ground_file, GROUND_FILES)
    for path in args.export:
        if pairs > 1 and path.lower().endswith(".bvh") and PER_CHARACTER not in path:
            raise ArgumentError(f"--export {path}: a BVH file holds one skeleton and {pairs} characters are "
                                f"retargeted; put {PER_CHARACTER} in the path to write one file per character.")


def export_paths(path: str, targets) -> list:
    """(target name, path) of the files one --export writes: one per character when ``path`` holds
    ``{target}``, else one file (target name None) holding every character."""
    if PER_CHARACTER not in path:
        return [(None, path)]
    return [(name, path.replace(PER_CHARACTER, name)) for name in targets]
