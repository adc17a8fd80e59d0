"""Reports a person can read (issue 15, items 11 and 12), from the batch command and `make demo`, run as
subprocesses on generated characters (no shared assets): every metric with its unit and rounded, copy-rotations'
value beside the solve's with which is better, one verdict line per target, the solver's progress as the objective
relative to copy-rotations', and the copy-rotations baseline Actions the demo says it writes."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from core.body import SHORT_HEAVY, BodyParams, make_body
from core.types import Character
from tests.conftest import ROOT
from tests.core.synth import walk_motion
from tools.make_demo_scene import build_armature, build_character

bpy = pytest.importorskip("bpy")


def run(script, *args, timeout=900):
    env = dict(os.environ)
    env.pop("BLENDER_USER_RESOURCES", None)
    p = subprocess.run([sys.executable, str(ROOT / "tools" / script), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=str(ROOT))
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def generated_blend(addon, tmp_path_factory):
    """'Walker': a skeleton-only source (an armature with a walk, no mesh: a body is fitted to it); 'Heavy': a
    short heavy skinned target."""
    import importlib
    bridge = importlib.import_module(addon.__name__ + ".reconform_addon.bridge")
    bpy.ops.wm.read_homefile(use_empty=True)
    sk, mesh, bone_map = make_body(BodyParams(name="walker", resolution=0.03), pose="T")
    arm = build_armature("Walker", sk, 0.0)
    bridge.write_motion(arm, bridge.read_skeleton(arm), walk_motion(Character(sk, mesh, bone_map), frames=24),
                        "Walk")
    sk2, mesh2, _ = make_body(dataclasses.replace(SHORT_HEAVY, resolution=0.03), pose="T")
    build_character("Heavy", sk2, mesh2, 1.2)
    path = tmp_path_factory.mktemp("reports") / "generated.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True)
    return path


LONG_FLOAT = re.compile(r"\d\.\d{5,}")      # a number printed at full precision


@pytest.mark.slow
def test_batch_reports_read_well(generated_blend, tmp_path):
    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"settings": {"iterations": 12}}))
    txt = tmp_path / "reconform.txt"
    rc, so, se = run("retarget.py", "--blend", generated_blend, "--source", "Walker", "--target", "Heavy",
                     "--method", "reconform", "--setup", setup, "--report", txt)
    assert rc == 0, se
    # progress lines: the objective relative to copy-rotations', not the raw loss
    solving = [ln for ln in so.splitlines() if "Solving" in ln and "Solving 0/" not in ln]   # 0/N: set-up done
    assert solving and all("% of copy-rotations'" in ln and "loss" not in ln for ln in solving), so
    text = txt.read_text()
    verdict = [ln for ln in text.splitlines() if ln.startswith("verdict: ")]
    assert len(verdict) == 1 and "ReConForM beats copy-rotations on" in verdict[0]
    assert "copy-rotations" in text and "% of the surface" in text and "m/s³" in text
    assert re.search(r"Grounded feet F1 +\d\.\d{3} +\d\.\d{3} +(better|worse|same)", text), text
    assert not LONG_FLOAT.search(text), text
    assert re.search(r"timings: read \d+\.\d\d s", text)
    # copy-rotations alone, from a skeleton-only source: measured too (a fitted body), in the JSON report
    js = tmp_path / "copy.json"
    rc, so, se = run("retarget.py", "--blend", generated_blend, "--source", "Walker", "--target", "Heavy",
                     "--report", js, "--quiet")
    assert rc == 0, se
    rep = json.loads(js.read_text())
    assert rep["method"] == "copy_rotations" and rep["metrics"] is not None
    assert rep["metrics"]["grounded_f1"] is not None and rep["reference_metrics"] is None
    table = {r["key"]: r for r in rep["metrics_table"]}
    assert table["floor_pen_mean"]["unit"] == "% of the surface" and table["floor_pen_mean"]["better"] == "lower"
    assert table["jerk_mean"]["unit"] == "m/s³" and table["grounded_f1"]["better"] == "higher"
    assert table["grounded_f1"]["copy_rotations"] is None and table["grounded_f1"]["change"] is None
    assert rep["verdict"].startswith("Copy Rotations: Grounded feet F1 ")


@pytest.mark.slow
def test_demo_writes_the_baselines_it_names_and_a_readable_report(demo_run):
    rc, so, se, out = demo_run            # tools/demo.py --frames 1 40 --quality fast (tests/conftest.py)
    assert rc == 0, se
    text = (out / "report.txt").read_text()
    for name in ("TallThin", "ShortHeavy"):
        assert f"'DemoMotion to {name} (copy rotations)' (the copy-rotations baseline" in text
    assert text.count("  Verdict: ReConForM beats copy-rotations on") == 4     # two bodies, two grounds
    assert "% of the surface" in text and "m/s³" in text and not LONG_FLOAT.search(text)
    with bpy.data.libraries.load(str(out / "output.blend")) as (src, _):
        actions = set(src.actions)
    assert {f"DemoMotion to {n}{s}" for n in ("TallThin", "ShortHeavy") for s in ("", " (copy rotations)")} <= actions
    # the couple, retargeted together onto partners of very different sizes, with the partner metrics
    assert "Lead -> Giant and Follow -> Child, together (2 characters, reconform):" in text
    assert "Between the characters" in text and "Contacts with partners F1" in text
    assert "Hand-to-partner distance error, mean" in text
    assert {f"{c} to {t}{s}" for c, t in (("LeadDance", "Giant"), ("FollowDance", "Child"))
            for s in ("", " (copy rotations)")} <= actions
