"""What a library run retargets: a manifest (JSON or CSV) or globs, and one shared set-up with per-character
(and per-clip) overrides, turned into a list of ``Job`` values. Pure Python: no bpy, no torch.

Manifest rows (docs/library.md): ``clip`` and ``character`` (file paths, relative to the manifest's folder),
optional ``action`` (the clip's Action), ``frames`` ("START-END", inclusive; or ``frame_start`` and
``frame_end``), ``setup`` (a JSON file merged over the shared set-up for this row), ``name`` (the new Action's
name) and ``output`` (the clip's folder name under its character's folder, in place of the clip id). Bad input
raises ``InputError`` with one line naming the file, the line and what to do.

A job's key is its folder under the output folder, ``<character>/<clip id>/<method id>``: the method id is
``copy_rotations`` or ``reconform-<quality>`` (the solver preset, ``settings.quality``, default balanced), so the
results of each method and preset live side by side and resume on their own.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
from dataclasses import dataclass

#: files a clip or a character can be (tools/retarget.py imports them)
SUPPORTED = (".fbx", ".glb", ".gltf", ".bvh", ".blend")
COLUMNS = ("clip", "character", "action", "frames", "frame_start", "frame_end", "setup", "name", "output")
#: set-up keys tools/retarget.py reads (docs/bridge.md), plus this command's override tables
SETUP_KEYS = ("method", "settings", "keyvert_count", "baseline_metrics", "source", "target", "bone_maps",
              "characters", "clips")
#: the keys an override table's entry may hold (a clip's or a character's)
OVERRIDE_KEYS = SETUP_KEYS[:-2]
METHODS = ("copy_rotations", "reconform")
#: the solver presets (SolverSettings.preset) and the one a set-up without ``settings.quality`` runs
QUALITIES, DEFAULT_QUALITY = ("fast", "balanced", "best"), "balanced"


class InputError(Exception):
    """Bad input to the library command (one line: what is wrong, where, what to do)."""


@dataclass(frozen=True)
class Job:
    """One clip onto one character.

    clip, character: absolute file paths; action: the clip's Action name or None (the one playing);
    frames: (start, end) inclusive or None (the Action's range); setup: the merged set-up (JSON-able dict,
    absolute paths); name: the new Action's name or None; key: the job's folder, '<character>/<clip id>/<method
    id>' (``job_key``), relative to the output folder; origin: where it came from ('library.csv line 4',
    'globs').
    """

    clip: str
    character: str
    action: str = None
    frames: tuple = None
    setup: dict = None
    name: str = None
    key: str = ""
    origin: str = ""

    @property
    def method(self) -> str:
        return (self.setup or {}).get("method") or "copy_rotations"


# ------------------------------------------------------------------------------------------------ set-up

def _absolute_role_files(setup: dict, base: str) -> dict:
    """``setup`` with each role's ``bone_map_file`` made absolute (relative to ``base``), recursively into the
    override tables."""
    out = dict(setup)
    for role in ("source", "target"):
        entry = out.get(role)
        if isinstance(entry, dict) and entry.get("bone_map_file"):
            out[role] = {**entry, "bone_map_file": os.path.normpath(os.path.join(base, entry["bone_map_file"]))}
    for table in ("characters", "clips"):
        if isinstance(out.get(table), dict):
            out[table] = {k: _absolute_role_files(v, base) if isinstance(v, dict) else v
                          for k, v in out[table].items()}
    return out


def check_setup(setup, where: str, top: bool = True) -> dict:
    """``setup`` if it is a well-formed set-up (keys and value types), else InputError naming ``where``."""
    if not isinstance(setup, dict):
        raise InputError(f"{where}: a set-up must be a JSON object.")
    keys = SETUP_KEYS if top else OVERRIDE_KEYS
    for k, v in setup.items():
        if k not in keys:
            raise InputError(f"{where}: unknown set-up key '{k}' (use {', '.join(keys)}).")
        if k in ("settings", "bone_maps", "characters", "clips") and not isinstance(v, dict):
            raise InputError(f"{where}: '{k}' must be a JSON object.")
        if k == "baseline_metrics" and not isinstance(v, bool):
            raise InputError(f"{where}: 'baseline_metrics' must be true or false.")
        if k in ("source", "target") and not isinstance(v, dict):
            raise InputError(f"{where}: '{k}' must be an object with 'bone_map', 'bone_map_file' or 'preset'.")
    if setup.get("method") not in (None,) + METHODS:
        raise InputError(f"{where}: method '{setup['method']}' is not one of {', '.join(METHODS)}.")
    for table in ("characters", "clips"):
        for name, sub in (setup.get(table) or {}).items():
            check_setup(sub, f"{where}: {table}['{name}']", top=False)
    for role in ("source", "target"):
        path = (setup.get(role) or {}).get("bone_map_file")
        if path and not os.path.isfile(path):
            raise InputError(f"{where}: {role} bone_map_file '{path}' does not exist.")
    return setup


def read_json_object(path: str, what: str) -> dict:
    """A JSON object from ``path`` (InputError with the line of a syntax error)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as ex:
        raise InputError(f"Cannot read {what} '{path}': {ex.strerror or ex}.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as ex:
        raise InputError(f"{what} '{path}' line {ex.lineno}: not valid JSON ({ex.msg}).") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} '{path}' must hold a JSON object.")
    return data


def load_setup(path: str) -> dict:
    """The shared set-up file (docs/library.md), checked, with file paths made absolute."""
    path = os.path.abspath(path)
    setup = _absolute_role_files(read_json_object(path, "set-up"), os.path.dirname(path))
    return check_setup(setup, f"set-up '{path}'")


def merge_setup(base: dict, over: dict) -> dict:
    """``over`` merged onto ``base``: ``settings`` and ``bone_maps`` key by key, every other key (method, a
    role's bone map, keyvert_count) replaced whole, so an override's preset never mixes with the base's map."""
    out = {k: v for k, v in base.items() if k not in ("characters", "clips")}
    for k, v in over.items():
        if k in ("settings", "bone_maps"):
            out[k] = {**(out.get(k) or {}), **v}
        elif k not in ("characters", "clips"):
            out[k] = v
    return out


def _override(table: dict, path: str):
    """The entry of an override table for ``path``: by file name, stem, or the path itself; (key, entry)."""
    name = os.path.basename(path)
    for key in (name, os.path.splitext(name)[0], path):
        if key in table:
            return key, table[key]
    for key, entry in table.items():
        if os.path.abspath(key) == path:
            return key, entry
    return None, None


def job_setup(shared: dict, clip: str, character: str, row_setup: dict = None, used: set = None) -> dict:
    """The set-up of one job: the shared one, its ``clips`` entry for ``clip``, its ``characters`` entry for
    ``character``, then the manifest row's own set-up file. ``used`` collects the override keys that matched."""
    out = merge_setup(shared, {})
    for table, path in (("clips", clip), ("characters", character)):
        key, entry = _override(shared.get(table) or {}, path)
        if entry is not None:
            out = merge_setup(out, entry)
            if used is not None:
                used.add((table, key))
    if row_setup:
        out = merge_setup(out, row_setup)
    return out


def unused_overrides(shared: dict, used: set) -> list:
    """Override keys of the shared set-up that matched no job (usually a typo in a character's name)."""
    return [f"{t}['{k}']" for t in ("characters", "clips") for k in (shared.get(t) or {}) if (t, k) not in used]


# ------------------------------------------------------------------------------------------------ jobs

def _safe(text: str) -> str:
    """A file-name-safe version of ``text`` (letters, digits, '.', '_', '-')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._") or "_"


def method_id(setup: dict) -> str:
    """The method part of a job's key: 'copy_rotations', or 'reconform-<quality>' ('reconform-balanced' when the
    set-up names no ``settings.quality``)."""
    setup = setup or {}
    method = setup.get("method") or "copy_rotations"
    if method != "reconform":
        return _safe(method)
    return _safe(f"reconform-{(setup.get('settings') or {}).get('quality') or DEFAULT_QUALITY}")


def job_key(clip: str, character: str, action=None, frames=None, output=None, method: str = "copy_rotations") -> str:
    """'<character stem>/<clip id>/<method id>': the clip id is '<clip stem>[_action][_f<start>-<end>]' (file-name
    safe), or ``output`` when given; ``method``: ``method_id`` of the job's set-up."""
    char_id = _safe(os.path.splitext(os.path.basename(character))[0])
    if output:
        clip_id = output
    else:
        clip_id = os.path.splitext(os.path.basename(clip))[0]
        if action:
            clip_id += f"@{action}"
        if frames:
            clip_id += f"_f{frames[0]}-{frames[1]}"
    return f"{char_id}/{_safe(clip_id)}/{_safe(method)}"


def key_parts(key: str) -> tuple:
    """(character, clip id, method id) of a job key (``job_key``; '' for a part the key lacks)."""
    parts = key.split("/")
    return tuple(parts[:3]) + ("",) * (3 - len(parts[:3]))


def parse_frames(value, where: str):
    """(start, end) from "1-20", "1 20", "1:20" or [1, 20]; None when empty."""
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, (list, tuple)):
        parts = value
    else:
        m = re.fullmatch(r"\s*(-?\d+)\s*(?:-|:|\s)\s*(-?\d+)\s*", str(value))
        parts = m.groups() if m else ()
    try:
        start, end = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise InputError(f"{where}: frames '{value}' is not START-END (two whole numbers, e.g. 1-120).") from None
    if end < start:
        raise InputError(f"{where}: frames {start}-{end} end before they start.")
    return start, end


def _input_file(value, base: str, what: str, where: str) -> str:
    if not value or not isinstance(value, str):
        raise InputError(f"{where}: no {what} (give a file path in the '{what}' column).")
    path = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
    if os.path.splitext(path)[1].lower() not in SUPPORTED:
        raise InputError(f"{where}: {what} '{value}' is not a {', '.join(SUPPORTED)} file.")
    return path


def make_job(row: dict, base: str, shared: dict, where: str, used: set = None) -> Job:
    """A Job from one manifest row (a dict of column -> value); paths relative to ``base``."""
    unknown = [k for k in row if k not in COLUMNS]
    if unknown:
        raise InputError(f"{where}: unknown column '{unknown[0]}' (use {', '.join(COLUMNS)}).")
    clip = _input_file(row.get("clip"), base, "clip", where)
    character = _input_file(row.get("character"), base, "character", where)
    frames = parse_frames(row.get("frames"), where)
    if row.get("frame_start") not in (None, "") or row.get("frame_end") not in (None, ""):
        if frames:
            raise InputError(f"{where}: give 'frames' or 'frame_start'/'frame_end', not both.")
        frames = parse_frames([row.get("frame_start"), row.get("frame_end")], where)
    row_setup = None
    if row.get("setup"):
        path = os.path.normpath(os.path.join(base, row["setup"]))
        try:
            row_setup = check_setup(_absolute_role_files(read_json_object(path, "set-up"), os.path.dirname(path)),
                                    f"{where}: set-up '{path}'", top=False)
        except InputError as ex:
            raise InputError(f"{where}: {ex}") from None
    action = row.get("action") or None
    setup = job_setup(shared, clip, character, row_setup, used)
    return Job(clip, character, action, frames, setup, row.get("name") or None,
               job_key(clip, character, action, frames, row.get("output"), method_id(setup)), where)


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _array_item_lines(text: str, i: int) -> list:
    """Line numbers (1-based) of the items of the JSON array starting at text[i] == '['."""
    dec, lines = json.JSONDecoder(), []
    i = _skip_ws(text, i + 1)
    while i < len(text) and text[i] != "]":
        lines.append(text.count("\n", 0, i) + 1)
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return lines


def _jobs_array_lines(text: str) -> list:
    """Line numbers of the job rows of a JSON manifest (a bare array, or an object with a 'jobs' array)."""
    dec = json.JSONDecoder()
    i = _skip_ws(text, 0)
    if text[i] == "[":
        return _array_item_lines(text, i)
    i = _skip_ws(text, i + 1)
    while i < len(text) and text[i] != "}":
        key, i = dec.raw_decode(text, i)
        i = _skip_ws(text, _skip_ws(text, i) + 1)   # past ':'
        if key == "jobs":
            return _array_item_lines(text, i)
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return []


def _json_rows(path: str, text: str) -> list:
    """[(where, row dict)] of a JSON manifest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as ex:
        raise InputError(f"manifest '{path}' line {ex.lineno}: not valid JSON ({ex.msg}).") from None
    if isinstance(data, dict):
        extra = [k for k in data if k != "jobs"]
        if extra or not isinstance(data.get("jobs"), list):
            raise InputError(f"manifest '{path}': a JSON manifest is a list of jobs or {{\"jobs\": [...]}}"
                             + (f" (unknown key '{extra[0]}')." if extra else "."))
        rows = data["jobs"]
    elif isinstance(data, list):
        rows = data
    else:
        raise InputError(f"manifest '{path}': a JSON manifest is a list of jobs or {{\"jobs\": [...]}}.")
    lines = _jobs_array_lines(text)
    out = []
    for k, row in enumerate(rows):
        where = f"{os.path.basename(path)} line {lines[k]}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: a job is a JSON object with 'clip' and 'character'.")
        out.append((where, row))
    return out


def _csv_rows(path: str, text: str) -> list:
    """[(where, row dict)] of a CSV manifest (header row first; '#' lines and blank lines ignored)."""
    lines = text.splitlines()
    keep = [(n + 1, ln) for n, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not keep:
        raise InputError(f"manifest '{path}' is empty: write a header row (clip,character,...) and one row per job.")
    reader = csv.reader([ln for _, ln in keep])
    header = [h.strip() for h in next(reader)]
    name = os.path.basename(path)
    for h in header:
        if h not in COLUMNS:
            raise InputError(f"{name} line {keep[0][0]}: unknown column '{h}' (use {', '.join(COLUMNS)}).")
    for need in ("clip", "character"):
        if need not in header:
            raise InputError(f"{name} line {keep[0][0]}: the header has no '{need}' column.")
    out = []
    for k, cells in enumerate(reader, start=1):
        where = f"{name} line {keep[k][0]}"
        if len(cells) > len(header):
            raise InputError(f"{where}: {len(cells)} cells for {len(header)} columns (quote values with commas).")
        out.append((where, {h: c.strip() for h, c in zip(header, cells) if c.strip()}))
    return out


def read_manifest(path: str, shared: dict, used: set = None) -> list:
    """[Job] of a manifest (.json or .csv); paths relative to the manifest's folder."""
    path = os.path.abspath(path)
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as ex:
        raise InputError(f"Cannot read manifest '{path}': {ex.strerror or ex}.") from None
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".json", ".csv"):
        raise InputError(f"manifest '{path}': use a .json or .csv file.")
    rows = _json_rows(path, text) if ext == ".json" else _csv_rows(path, text)
    base = os.path.dirname(path)
    return [make_job(row, base, shared, where, used) for where, row in rows]


def expand(patterns, option: str) -> list:
    """Sorted unique files matching ``patterns`` (globs, '**' recursive, or plain paths: a shell may have
    expanded them already); InputError for a pattern that matches nothing."""
    out = []
    for pat in patterns:
        pat = os.path.expanduser(pat)
        hits = sorted(glob.glob(pat, recursive=True)) if glob.has_magic(pat) else ([pat] if os.path.exists(pat)
                                                                                     else [])
        hits = [h for h in hits if os.path.isfile(h) and os.path.splitext(h)[1].lower() in SUPPORTED]
        if not hits:
            raise InputError(f"{option} '{pat}' matches no {', '.join(SUPPORTED)} file.")
        out += [os.path.abspath(h) for h in hits if os.path.abspath(h) not in out]
    return out


def glob_jobs(motions, characters, shared: dict, action=None, frames=None, used: set = None) -> list:
    """Every clip onto every character: [Job], characters outer, clips inner."""
    clips, chars = expand(motions, "--motions"), expand(characters, "--characters")
    jobs = []
    for ch in chars:
        for c in clips:
            if c == ch:
                continue
            setup = job_setup(shared, c, ch, None, used)
            key = job_key(c, ch, action, frames, None, method_id(setup))
            jobs.append(Job(c, ch, action, frames, setup, None, key,
                            f"'{os.path.basename(c)}' onto '{os.path.basename(ch)}'"))
    return jobs


def check_unique(jobs: list):
    """Two jobs never write to the same folder."""
    seen = {}
    for job in jobs:
        if job.key in seen:
            raise InputError(f"{job.origin} and {seen[job.key]} both write '{job.key}': give one an 'output' name "
                             "(or rename a file).")
        seen[job.key] = job.origin
