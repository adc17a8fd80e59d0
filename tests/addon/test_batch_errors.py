"""tools/retarget.py's errors a newcomer can act on, and --show-map / --save-setup:

- argument and file mistakes (nothing to write, an unknown export format, frames in the wrong order, a missing
  file) fail with exit 1 and one ``error:`` line naming the option, before bpy or torch is imported (a stand-in
  ``bpy`` and ``torch`` that refuse to load prove it);
- a motion given as --target says it is a motion; --frames reaching past the clip is an error unless
  --clamp-frames;
- --show-map prints each character's bone map and body meshes and writes nothing; --save-setup writes them as a
  set-up that --setup takes back.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.addon.test_batch_export import FRAMES, run_tool, scene  # noqa: F401  (the module's scene fixture)
from tests.conftest import ROOT

TOOL = ROOT / "tools" / "retarget.py"


def run_without_blender(*args, tmp_path):
    """The command with stand-ins for bpy and torch that fail on import: (exit status, stdout, stderr)."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    for name in ("bpy", "torch"):
        (fake / f"{name}.py").write_text(f"raise ImportError('{name} was imported')\n")
    env = dict(os.environ, PYTHONPATH=str(fake))
    p = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60,
                       env=env, cwd=str(tmp_path))
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args, message", [
    (["--source", "walk.bvh", "--target", "hero.glb"],
     "error: nothing to write: give --out RESULT.blend, --export FILE (.fbx, .glb, .gltf, .bvh) or --report "
     "REPORT.json (or --show-map to see the bone maps).\n"),
    (["--source", "walk.bvh", "--target", "hero.glb", "--export", "x.abc"],
     "error: --export x.abc: unsupported format '.abc' (use .fbx, .glb, .gltf, .bvh).\n"),
    (["--source", "A", "--target", "B", "--frames", "20", "10", "--report", "r.json"],
     "error: --frames 20 10: START is after END; give START <= END.\n"),
    (["--source", "missing.bvh", "--target", "B", "--out", "o.blend"], "error: --source missing.bvh: file not found.\n"),
    (["--blend", "nowhere.blend", "--source", "A", "--target", "B", "--out", "o.blend"],
     "error: --blend nowhere.blend: file not found.\n"),
    (["--source", "A", "--target", "B", "--out", "o.blend", "--name-template", "{clip}_{target}"],
     "error: --name-template {clip}_{target}: unknown placeholder {clip} (use {source}, {target}, {action}, "
     "{method}).\n"),
])
def test_mistakes_fail_before_blender_loads(args, message, tmp_path):
    rc, so, se = run_without_blender(*args, tmp_path=tmp_path)
    assert (rc, so, se) == (1, "", message)
    assert sorted(os.listdir(tmp_path)) == ["fake"]


@pytest.mark.slow
def test_a_motion_given_as_target_says_so(scene, tmp_path):  # noqa: F811
    out = tmp_path / "o.blend"
    rc, so, se = run_tool("--blend", scene / "good.blend", "--source", "Walker", "--target", scene / "walker.bvh",
                          "--out", out, "--quiet")
    assert rc == 1 and not out.exists(), se
    assert se == (f"error: --target {scene / 'walker.bvh'}: 'walker' is a motion (a skeleton that moves no mesh, "
                  "playing 'walker'), not a character with a mesh: give the motion as --source and, as --target, a "
                  "character whose armature deforms a mesh (.glb, .fbx, .blend).\n")


@pytest.mark.slow
def test_frames_past_the_clip_need_clamp_frames(scene, tmp_path):  # noqa: F811
    rep = tmp_path / "r.json"
    args = ["--blend", scene / "good.blend", "--source", "Walker", "--target", "Heavy", "--frames", 5, 5000,
            "--report", rep, "--quiet"]
    rc, so, se = run_tool(*args)
    assert rc == 1 and not rep.exists()
    assert se == ("error: --frames 5 5000 reaches past the clip (Action 'Walk' on 'Walker' has frames 1..12): give "
                  "a range inside it, or add --clamp-frames to retarget frames 5..12.\n"), se
    rc, so, se = run_tool(*args, "--clamp-frames")
    assert rc == 0, se
    report = json.loads(rep.read_text())
    assert (report["frame_start"], report["frame_end"]) == (5, 12)


@pytest.mark.slow
def test_show_map_and_save_setup(scene, tmp_path):  # noqa: F811
    pair = ["--blend", scene / "good.blend", "--source", "Walker", "--target", "Heavy"]
    rc, so, se = run_tool(*pair, "--show-map", "--quiet")
    assert rc == 0, se
    assert "source 'Walker' (Walker):" in so and "target 'Heavy' (Heavy):" in so, so
    assert "left_upper_arm" in so and "body meshes: Heavy_body" in so, so
    assert sorted(os.listdir(tmp_path)) == []                       # it looked, and wrote nothing
    setup = tmp_path / "setup.json"
    rc, so, se = run_tool(*pair, "--save-setup", setup)
    assert rc == 0, se
    doc = json.loads(setup.read_text())
    src_map, tgt_map = doc["source"]["bone_map"], doc["target"]["bone_map"]
    assert doc["method"] == "copy_rotations" and len(src_map) > 15 and src_map.keys() == tgt_map.keys()
    # edited (the head left unmapped on the target) and passed back: the run takes it
    del tgt_map["head"]
    setup.write_text(json.dumps(doc))
    rep = tmp_path / "r.json"
    rc, so, se = run_tool(*pair, "--setup", setup, "--report", rep)
    assert rc == 0, se
    report = json.loads(rep.read_text())
    assert report["target"]["mapped"] == len(tgt_map) and "head" in report["target"]["unmapped"]
