"""The worst frames of `make bench`'s cases as pictures: per case of the single-pair table (``common.CASES``), the
frame of ReConForM's largest mesh self-penetration and the frame of its largest contact depth (docs/metrics.md
"Mesh self-penetration", "Contact depth"), each rendered with copy-rotations on the left and ReConForM on the right
(tools/render/render_worst.py, Workbench, 960 × 540, in one child process after the cases), and listed in the
bench's markdown with both methods' values on that frame.

    .venv/bin/python tools/bench/run.py                          # bench_output/worst_frames/<case>_self_pen.png, ...
    .venv/bin/python tools/bench/run.py --no-renders             # the table of worst frames, no pictures
    .venv/bin/python tools/bench/run.py --cases 2 --no-terrain --no-zoo --no-scaling --no-memory --no-windows \\
        --no-partners                                            # the first two cases only

The frame is ReConForM's worst (the result the product delivers), not the worse of the two methods': the picture
shows where the result is at its worst, with copy-rotations on the same frame for comparison; copy-rotations' own
worst value (on its own frame) is listed beside it. The per-frame series are the metrics' own
(``core.metrics.scores.evaluate(..., series=...)``), read in the bench's feet readings at no extra cost.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
RENDER = ROOT / "tools" / "render" / "render_worst.py"
SIZE = (960, 540)
#: (file suffix, key of the metrics' per-frame series, what the picture's title calls it)
KINDS = (("self_pen", "mesh_pen", "mesh self-penetration"), ("contact_depth", "contact_depth", "contact depth"))


@dataclass
class Worst:
    """One worst frame of a case: ``kind`` ('self_pen' | 'contact_depth'), ``index`` its clip frame (0 = the clip's
    first), ``init`` and ``ours`` copy-rotations' and ReConForM's values on it, ``init_worst`` / ``init_index``
    copy-rotations' own worst value and its frame (NaN / -1 without one)."""

    kind: str
    index: int
    init: float
    ours: float
    init_worst: float = float("nan")
    init_index: int = -1


def pick(init: dict, ours: dict) -> dict:
    """{kind: Worst or None} from the per-frame series of copy-rotations and ReConForM (dicts of (T,) arrays,
    ``KINDS``' keys; NaN: not measured on that frame, the contact depth off the source's contact frames): the
    frame of ReConForM's largest value (the first of equal ones); None where ReConForM's series has no finite
    value above 0 (nothing to show)."""
    out = {}
    for kind, key, _ in KINDS:
        o, i = (np.asarray(s[key], float) for s in (ours, init))
        if not (np.isfinite(o) & (np.nan_to_num(o, nan=0.0) > 0)).any():
            out[kind] = None
            continue
        t = int(np.nanargmax(o))
        w = Worst(kind, t, float(i[t]), float(o[t]))
        if np.isfinite(i).any():
            w.init_index = int(np.nanargmax(i))
            w.init_worst = float(i[w.init_index])
        out[kind] = w
    return out


def series(outcome) -> tuple:
    """(copy-rotations', ReConForM's) per-frame series of ``outcome``'s clip (``pick``'s arguments): the ones its
    metrics read (``Outcome.series``; neither depends on the source's floor). Needs a retarget measured with
    copy-rotations beside."""
    if len(outcome.series) != 2:
        raise ValueError("the outcome carries no per-frame series of both clips: retarget with metrics and "
                         "baseline_metrics on")
    return outcome.series[1], outcome.series[0]


def rank_value(kind: str, w: Worst, height: float) -> float:
    """How bad ReConForM's worst frame ``w`` is, comparable across bodies: the self-penetration's share of the
    body's volume, the contact depth as a share of the target's ``height``."""
    return w.ours if kind == "self_pen" else w.ours / height


def safe_name(case: str) -> str:
    """A file-name-safe name of a case ('clip → target' -> 'clip_to_target')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", case.replace("→", " to ")).strip("_")


def value(kind: str, v: float) -> str:
    if v != v:
        return "n/a"
    return f"{100 * v:.3f} %" if kind == "self_pen" else f"{1000 * v:.1f} mm"


def deepest_point(mod, character, motion, index: int, surfaces=None, depth: float = None):
    """(world position (3,), depth in metres) of the point to mark on clip frame ``index`` of ``motion``
    (``character``'s), or None where no point is inside; ``mod(name)``: the module ``core.<name>``; ``surfaces``:
    the character's ``mesh_volume.surfaces``, when already made.

    ``depth`` None: the deepest of the mesh self-penetration's probes inside another part (``mesh_volume.depths``).
    ``depth`` given (the frame's contact depth, metres): the surface vertex whose depth is nearest to it, on every
    vertex as the contact depth reads them (``mesh_volume.near_depths``): the point that sets the frame's contact
    depth, not the volume's deepest point, which can lie far from the contact."""
    import torch
    mv = mod("metrics.mesh_volume")
    if surfaces is None:
        kv = character.keyverts
        surfaces = mv.surfaces(character, None if kv is None else kv.vertex_ids)
    surf = surfaces[0] if depth is None else surfaces[1]
    if depth is not None and not depth > 0:
        return None
    track = mod("character.track").ClipTrack(character, motion.slice(index, index + 1))
    pos, nrm = track.vertices(surf.ids, normals=True)                  # world, (1, M, 3)
    M = character.skeleton.object_matrix
    A, b = M[:3, :3], M[:3, 3]
    R = A / np.linalg.norm(A, axis=0)
    x = torch.as_tensor((pos - b) @ np.linalg.inv(A).T, dtype=torch.float32)      # armature space, as measured
    n = torch.as_tensor(nrm @ R, dtype=torch.float32)
    with torch.no_grad():
        d = mv.depths(surf, x, n)[0].numpy() * surf.scale                           # (probes,) metres
    if not d.size:
        return None
    k = int(np.argmax(d)) if depth is None else int(np.argmin(np.abs(d - depth)))
    if d[k] <= 0:
        return None
    return pos[0, surf.probe[k]], float(d[k])


def job_item(case: str, target_path, outcome, worst: dict, out_dir, mod=None) -> dict:
    """The render job of one case (``render_worst.py``'s item): both motions in the scene's channels written to
    ``out_dir/.motions/<case>.npz``, one picture per worst frame: ``out_dir/<case>_<kind>.png``, with each body's
    point marked (``deepest_point``: on the self-penetration's picture its deepest point inside itself, on the contact
    depth's the point that sets the frame's contact depth; ``mod(name)``: the module ``core.<name>``, None: no
    marks). None when no frame is worth showing."""
    frames = []
    out_dir = pathlib.Path(out_dir)
    skel, init = outcome.for_scene(outcome.init_motion)
    _, ours = outcome.for_scene()
    surfaces = None
    if mod is not None and any(worst.values()):
        kv = outcome.target.keyverts
        surfaces = mod("metrics.mesh_volume").surfaces(outcome.target, None if kv is None else kv.vertex_ids)
    for kind, _, label in KINDS:
        w = worst.get(kind)
        if w is None:
            continue
        frame = int(ours.frame_start) + w.index
        at_contact = kind == "contact_depth"
        marks = [None, None] if mod is None else [
            deepest_point(mod, outcome.target, m, w.index, surfaces, v if at_contact else None)
            for m, v in ((outcome.init_motion, w.init), (outcome.motion, w.ours))]
        title = (f"{case} · frame {frame} · worst {label} of ReConForM: copy-rotations {value(kind, w.init)}, "
                 f"ReConForM {value(kind, w.ours)}")
        if mod is not None:
            what = ("the deepest point at the source's contacts" if at_contact
                    else "the deepest point of each body's surface inside another part")
            title += (f"\nred: {what} ("
                      + ", ".join(f"{'none' if m is None else f'{1000 * m[1]:.0f} mm'}" for m in marks) + ")")
        frames.append(dict(frame=frame, path=str(out_dir / f"{safe_name(case)}_{kind}.png"), title=title,
                           left="copy-rotations", right="ReConForM",
                           marks=[None if m is None else [float(c) for c in m[0]] for m in marks]))
    if not frames:
        return None
    npz = out_dir / ".motions" / f"{safe_name(case)}.npz"
    npz.parent.mkdir(parents=True, exist_ok=True)
    np.savez(npz, init_rotations=init.rotations, init_locations=init.locations, ours_rotations=ours.rotations,
             ours_locations=ours.locations, fps=float(ours.fps), frame_start=int(ours.frame_start))
    return dict(target=str(pathlib.Path(target_path).resolve()), motions=str(npz), bones=list(skel.names),
                frames=frames)


def render(items: list, out_dir, run=subprocess.run, timeout: float = 900.0, size=SIZE) -> tuple:
    """Render every item of ``items`` (``job_item``'s; None skipped) in one child process, ``size`` (width,
    height) pixels; returns (the paths written, an error line or None). ``run``: ``subprocess.run`` (a test
    passes its own)."""
    items = [it for it in items if it]
    if not items:
        return [], None
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    job = out_dir / ".motions" / "job.json"
    job.parent.mkdir(parents=True, exist_ok=True)
    job.write_text(json.dumps(dict(width=size[0], height=size[1], items=items)), encoding="utf-8")
    try:
        proc = run([sys.executable, str(RENDER), str(job)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"the renders took more than {timeout:.0f} s"
    wrote = [line[6:] for line in (proc.stdout or "").splitlines() if line.startswith("WROTE ")]
    err = None
    if proc.returncode != 0:
        err = "render failed: " + ((proc.stderr or "").strip().splitlines() or ["?"])[-1]
    return [p for p in wrote if pathlib.Path(p).is_file()], err


def section(out, rows: list, out_dir, written, error=None, base=None, intro=None):
    """The markdown table of the worst frames through ``out``: ``rows`` [(case, first scene frame, {kind: Worst or
    None})] (a kind missing from a row's dict is not listed), pictures in ``written`` linked relative to ``base``
    (the markdown's folder), after ``intro`` (None: the single-pair cases' sentence)."""
    out_dir = pathlib.Path(out_dir)
    written = {str(pathlib.Path(p)) for p in written}
    out()
    out((intro or "Worst frames (tools/bench/worst_frames.py): per case, the frame of ReConForM's largest mesh "
         "self-penetration (share of the body's volume) and of its largest contact depth, with copy-rotations' value "
         "on the same frame and its own worst (frames: the scene's); pictures: copy-rotations left, ReConForM right")
        + (f" ({error})" if error else "") + ".")
    out()
    out("| case | worst of ReConForM | frame | copy-rot | ReConForM | copy-rot's own worst (frame) | picture |")
    out("|---|---|---|---|---|---|---|")
    for case, start, worst in rows:
        for kind, _, label in KINDS:
            if kind not in worst:                                # a table of some kinds only (the zoo's)
                continue
            w = worst[kind]
            if w is None:
                none = "0 on every frame" if kind == "self_pen" else "0 or no source contact on every frame"
                out(f"| {case} | {label} | – | | {none} | | |")
                continue
            png = out_dir / f"{safe_name(case)}_{kind}.png"
            link = ""
            if str(png) in written:
                rel = png.relative_to(base) if base is not None and png.is_relative_to(base) else png
                link = f"[{png.name}]({rel.as_posix()})"
            own = (f"{value(kind, w.init_worst)} ({start + w.init_index})" if w.init_index >= 0 else "n/a")
            out(f"| {case} | {label} | {start + w.index} | {value(kind, w.init)} | {value(kind, w.ours)} | {own} | "
                f"{link} |")
