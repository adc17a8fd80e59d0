"""tools/bench/worst_frames.py: the bench's worst frames are ReConForM's argmax of each per-frame series, the render
step gets those frames and writes a picture per frame (tools/render/render_worst.py), the markdown lists them."""

import importlib
import json
import pathlib
import struct
import subprocess
import types

import numpy as np
import pytest

from core.types import Motion
from tools.bench import worst_frames as wf

NAN = float("nan")


def series(pen, depth):
    return {"mesh_pen": np.array(pen, float), "contact_depth": np.array(depth, float)}


def test_pick_is_reconforms_argmax_with_copy_rotations_on_that_frame():
    init = series([0.5, 0.1, 0.2, 0.0, 0.1], [NAN, 0.02, NAN, 0.01, 0.05])
    ours = series([0.0, 0.1, 0.3, 0.2, 0.3], [NAN, 0.01, NAN, 0.03, 0.002])
    w = wf.pick(init, ours)
    sp, cd = w["self_pen"], w["contact_depth"]
    assert (sp.index, sp.init, sp.ours) == (2, 0.2, 0.3)           # the first of equal maxima
    assert (sp.init_index, sp.init_worst) == (0, 0.5)              # copy-rotations' own worst, on its own frame
    assert (cd.index, cd.init, cd.ours) == (3, 0.01, 0.03)         # NaN: no source contact, never picked
    assert (cd.init_index, cd.init_worst) == (4, 0.05)


def test_pick_gives_none_where_there_is_nothing_to_show():
    w = wf.pick(series([0.1, 0.2], [0.01, NAN]), series([0.0, 0.0], [NAN, NAN]))
    assert w == {"self_pen": None, "contact_depth": None}
    w = wf.pick(series([0.1, 0.2], [0.0, NAN]), series([0.0, 1e-4], [0.0, NAN]))
    assert w["self_pen"].index == 1 and w["contact_depth"] is None   # contacts, but none inside the body


def test_safe_name():
    assert wf.safe_name("NC_bandai_walk_normal_001 → mh_male_heavy") == "NC_bandai_walk_normal_001_to_mh_male_heavy"
    assert wf.safe_name("a b/c:d → e") == "a_b_c_d_to_e"


def fake_outcome(T=6, J=3, frame_start=10):
    rot = np.zeros((T, J, 4))
    rot[..., 0] = 1.0
    init, ours = Motion(rot, np.zeros((T, J, 3)), 30.0, frame_start), Motion(rot, np.ones((T, J, 3)), 30.0,
                                                                             frame_start)
    skel = types.SimpleNamespace(names=["hips", "spine", "head"])
    o = types.SimpleNamespace(init_motion=init, motion=ours, target=None)
    o.for_scene = lambda motion=None: (skel, ours if motion is None else motion)
    return o


def test_job_item_and_render_call_with_the_picked_frames(tmp_path):
    o = fake_outcome()
    worst = wf.pick(series([0.0, 0.1, 0.0, 0.3, 0.0, 0.0], [NAN] * 6),
                    series([0, 0.2, 0.1, 0, 0, 0], [NAN, NAN, 0.01, NAN, 0.02, NAN]))
    item = wf.job_item("walk → heavy", tmp_path / "heavy.glb", o, worst, tmp_path / "wf")
    assert [f["frame"] for f in item["frames"]] == [11, 14]          # frame_start + the picked indices
    assert [pathlib.Path(f["path"]).name for f in item["frames"]] == ["walk_to_heavy_self_pen.png",
                                                                      "walk_to_heavy_contact_depth.png"]
    assert "frame 11" in item["frames"][0]["title"] and "20.0 mm" in item["frames"][1]["title"]
    assert item["bones"] == ["hips", "spine", "head"]
    data = np.load(item["motions"])
    assert np.array_equal(data["ours_locations"], o.motion.locations) and int(data["frame_start"]) == 10
    assert wf.job_item("x", tmp_path / "a.glb", o, {"self_pen": None, "contact_depth": None}, tmp_path) is None

    calls = []

    def run(cmd, **kw):                                               # the child: writes what the job asks for
        calls.append(cmd)
        job = json.loads(pathlib.Path(cmd[-1]).read_text())
        lines = []
        for it in job["items"]:
            for f in it["frames"]:
                pathlib.Path(f["path"]).write_bytes(b"png")
                lines.append(f"WROTE {f['path']}")
        return subprocess.CompletedProcess(cmd, 0, "\n".join(lines), "")
    written, err = wf.render([item, None], tmp_path / "wf", run=run)
    assert err is None and len(calls) == 1 and calls[0][1] == str(wf.RENDER)
    job = json.loads(pathlib.Path(calls[0][-1]).read_text())
    assert (job["width"], job["height"]) == wf.SIZE and [f["frame"] for f in job["items"][0]["frames"]] == [11, 14]
    assert sorted(written) == sorted(f["path"] for f in item["frames"])
    assert wf.render([None], tmp_path / "wf", run=run) == ([], None) and len(calls) == 1

    failed = wf.render([item], tmp_path / "wf",
                       run=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "Traceback\nerror: no armature"))
    assert failed == ([], "render failed: error: no armature")

    lines = []
    wf.section(lambda s="": lines.append(s), [("walk → heavy", 10, worst)], tmp_path / "wf", written, base=tmp_path)
    rows = [line for line in lines if line.startswith("| walk")]
    assert rows[0].startswith("| walk → heavy | mesh self-penetration | 11 | 10.000 % | 20.000 % | 30.000 % (13) |")
    assert "[walk_to_heavy_self_pen.png](wf/walk_to_heavy_self_pen.png)" in rows[0]
    assert "| contact depth | 14 | n/a | 20.0 mm | n/a | [walk_to_heavy_contact_depth.png]" in rows[1]


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.assets
def test_render_worst_draws_both_bodies_and_the_marks(addon, assets, clean_scene, tmp_path):
    """A real render (child process, Workbench): the target twice at 320 × 180, a red mark on each body."""
    import bpy
    bridge = importlib.import_module(addon.__name__ + ".reconform_addon.bridge")
    path = assets / "characters" / "mh_teen_girl.glb"
    arm = bridge.find_armature(bridge.import_file(str(path), report=lambda m: None))
    skel = bridge.read_skeleton(arm)
    chest = [float(c) for c in np.array(arm.matrix_world) @ np.array([0, 0, 0, 1.0])][:3]
    chest[2] += 1.2
    bpy.ops.wm.read_homefile(use_empty=True)
    T, J = 3, skel.num_bones
    rot = np.zeros((T, J, 4))
    rot[..., 0] = 1.0
    np.savez(tmp_path / "m.npz", init_rotations=rot, init_locations=np.zeros((T, J, 3)), ours_rotations=rot,
             ours_locations=np.zeros((T, J, 3)), fps=30.0, frame_start=1)
    png = tmp_path / "out" / "case_self_pen.png"
    item = dict(target=str(path), motions=str(tmp_path / "m.npz"), bones=list(skel.names),
                frames=[dict(frame=2, path=str(png), title="case · frame 2", left="copy-rotations",
                             right="ReConForM", marks=[chest, chest])])
    written, err = wf.render([item], tmp_path / "out", timeout=300, size=(320, 180))
    assert err is None and written == [str(png)]
    assert png_size(png) == (320, 180)
    img = bpy.data.images.load(str(png))
    px = np.array(img.pixels[:]).reshape(180, 320, 4)[..., :3]
    bpy.data.images.remove(img)
    red = (px[..., 0] > 2.5 * px[..., 1]) & (px[..., 0] > 2.5 * px[..., 2])     # the marks, drawn in front
    assert red[:, :160].sum() >= 3 and red[:, 160:].sum() >= 3       # one on the left body, one on the right
    body = (np.abs(px - px[5, 5]).sum(-1) > 0.1)[40:150]             # off the background, below the title
    assert body[:, 40:150].any() and body[:, 170:280].any()


def test_the_series_are_the_outcomes_own_copy_rotations_first():
    """``series``: (copy-rotations', ReConForM's) from ``Outcome.series`` (the result's first there); an outcome
    measured without copy-rotations is refused, not read as one clip."""
    ours, init = series([0.0, 0.1], [NAN, 0.0]), series([0.2, 0.0], [NAN, 0.01])
    assert wf.series(types.SimpleNamespace(series=[ours, init])) == (init, ours)
    with pytest.raises(ValueError, match="baseline_metrics"):
        wf.series(types.SimpleNamespace(series=[ours]))


def test_the_zoo_shows_its_worst_cases_per_kind_ranked_across_bodies(tmp_path, monkeypatch):
    """bench_zoo.WorstShown keeps, per kind, the SHOWN cases with ReConForM's worst frames (contact depth as a share
    of each body's height, so a tall body's millimetres do not outrank a child's), makes render jobs only for them,
    and lists only their kinds."""
    from tools.bench import bench_zoo
    monkeypatch.setitem(__import__("sys").modules, "worst_frames", wf)
    # case k: ReConForM's worst self-penetration k %, worst contact depth 10 (k + 1) mm, on bodies of height 1 + k
    cases = {f"c{k}": (series([0.0, 0.01 * k], [NAN, NAN]), series([0.0, 0.01 * k], [0.0, 0.01 * (k + 1)]), 1.0 + k)
             for k in range(6)}
    monkeypatch.setattr(wf, "series", lambda o: cases[o.case][:2])
    made = []
    monkeypatch.setattr(wf, "job_item", lambda case, path, o, worst, out, mod: made.append((case, set(worst))) or
                        {"case": case, "kinds": sorted(worst)})
    shown = bench_zoo.WorstShown.__new__(bench_zoo.WorstShown)
    shown.mod, shown.dir, shown.best, shown.files = None, tmp_path / "wf", {}, {}
    monkeypatch.setattr(shown, "_body_file", lambda body: tmp_path / f"{body}.blend")
    for name, (_, _, h) in cases.items():
        o = fake_outcome()
        o.case, o.target = name, types.SimpleNamespace(height=h)
        shown.add(name, "zoo_x", o)
    assert bench_zoo.WorstShown.SHOWN == 4
    assert [b[1] for b in shown.best["self_pen"]] == ["c5", "c4", "c3", "c2"]          # c0's 0 % is nothing to show
    # depth / height: (k + 1) / (1 + k) cm/m is the same for every k; ties keep the first comers
    assert [b[1] for b in shown.best["contact_depth"]] == ["c0", "c1", "c2", "c3"]
    assert ("c1", {"self_pen"}) in made and all(len(kinds) == 1 for _, kinds in made)

    rendered = []
    monkeypatch.setattr(wf, "render", lambda items, out: (rendered.extend(items) or [], None))
    lines = []
    shown.section(lambda s="": lines.append(s), lambda s: None)
    assert len(rendered) == 8 and {it["case"] for it in rendered} == {"c0", "c1", "c2", "c3", "c4", "c5"}
    rows = [line for line in lines if line.startswith("| c") and not line.startswith("| case")]
    assert len(rows) == 8 and rows[0].startswith("| c5 | mesh self-penetration |")
    assert sum("contact depth" in r for r in rows) == 4 and "Worst frames of the zoo" in "".join(lines)


def test_the_contact_depth_mark_is_the_point_that_sets_the_frames_depth():
    """On the contact depth's picture, the mark is the surface vertex whose depth is the frame's contact depth (the
    point at the contact), not the deepest point of the body, which can lie elsewhere: a box pressed 1 cm into
    another at the contact, and a second one 3 cm deep far from it."""
    from core.metrics import mesh_volume as mv
    from tests.core.test_mesh_volume import box, character
    A, fA, nA = box([-0.2, -0.2, -0.2], [0.2, 0.2, 0.2])
    B, fB, nB = box([-0.05, -0.05, 0.25], [0.05, 0.05, 0.35])            # above A's top, pressed at the contact
    C, fC, nC = box([0.25, -0.05, -0.05], [0.35, 0.05, 0.05])            # beside A's side, far from the contact
    bottom = len(A) + int(np.argmin(np.linalg.norm(B - [0, 0, 0.25], axis=1)))
    ch = character([(0, A, fA, nA), (6, B, fB, nB), (4, C, fC, nC)], keyverts=[("left_palm", "left_hand", bottom)])
    motion = Motion.rest(1, 7)
    motion.locations[0, 6] = (0, 0, -0.06)                               # 1 cm into A's top
    motion.locations[0, 4] = (-0.08, 0, 0)                               # 3 cm into A's side
    mod = lambda name: importlib.import_module(f"core.{name}")           # noqa: E731
    where, deep = wf.deepest_point(mod, ch, motion, 0)
    assert deep == pytest.approx(0.03, abs=1e-3) and where[0] > 0.15     # the volume's deepest: at the side
    surfaces = mv.surfaces(ch, ch.keyverts.vertex_ids)
    where, deep = wf.deepest_point(mod, ch, motion, 0, surfaces, depth=0.01)
    assert deep == pytest.approx(0.01, abs=1e-3) and where[2] > 0.15     # at the contact, on A's top
    assert wf.deepest_point(mod, ch, motion, 0, surfaces, depth=0.0) is None
