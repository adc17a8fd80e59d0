"""Manifests (JSON, CSV), globs and the shared set-up with its overrides: what jobs they make, and the one-line
message of each bad input, naming the file and the line."""

import json
import os

import pytest

from tools.motion_library import inputs
from tools.motion_library.inputs import InputError


def touch(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def lib(tmp_path):
    for name in ("walk.bvh", "run.fbx", "jump.bvh"):
        touch(tmp_path / "mocap" / name)
    for name in ("hero.glb", "heavy.glb"):
        touch(tmp_path / "chars" / name)
    touch(tmp_path / "chars" / "notes.txt")
    return tmp_path


def test_csv_manifest_rows_become_jobs(lib):
    m = touch(lib / "library.csv", "# studio library\n"
              "clip,character,action,frames,name\n"
              "mocap/walk.bvh,chars/hero.glb,,1-120,Walk hero\n"
              "\n"
              "mocap/run.fbx,chars/heavy.glb,Take 001,,\n")
    jobs = inputs.read_manifest(str(m), {"method": "reconform"})
    assert [j.key for j in jobs] == ["hero/walk_f1-120/reconform-balanced", "heavy/run_Take_001/reconform-balanced"]
    assert jobs[0].clip == str(lib / "mocap" / "walk.bvh") and jobs[0].frames == (1, 120)
    assert jobs[0].name == "Walk hero" and jobs[0].origin == "library.csv line 3"
    assert jobs[1].action == "Take 001" and jobs[1].frames is None and jobs[1].origin == "library.csv line 5"
    assert all(j.method == "reconform" for j in jobs)


def test_json_manifest_both_shapes_with_line_numbers(lib):
    rows = [{"clip": "mocap/walk.bvh", "character": "chars/hero.glb", "frame_start": 5, "frame_end": 9},
            {"clip": "mocap/jump.bvh", "character": "chars/hero.glb", "output": "jump_take2"}]
    bare = touch(lib / "a.json", json.dumps(rows, indent=2))
    wrapped = touch(lib / "b.json", json.dumps({"jobs": rows}, indent=1))
    for path in (bare, wrapped):
        jobs = inputs.read_manifest(str(path), {})
        assert [j.key for j in jobs] == ["hero/walk_f5-9/copy_rotations", "hero/jump_take2/copy_rotations"]
        assert jobs[0].frames == (5, 9)
    for path in (bare, wrapped):   # each job's line is the line of its opening brace
        braces = [n + 1 for n, ln in enumerate(path.read_text().splitlines()) if ln.strip() == "{"]
        assert [j.origin for j in inputs.read_manifest(str(path), {})] == [f"{path.name} line {n}" for n in braces[-2:]]


@pytest.mark.parametrize("text, message", [
    ("clip,character\nmocap/walk.bvh,chars/hero.glb\nmocap/walk.bvh\n", "m.csv line 3: no character"),
    ("clip,character,speed\n", "m.csv line 1: unknown column 'speed'"),
    ("clip,actor\n", "m.csv line 1: unknown column 'actor'"),
    ("clip,character,frames\n\nmocap/walk.bvh,chars/hero.glb,20-10\n", "m.csv line 3: frames 20-10 end before"),
    ("clip,character,frames\nmocap/walk.bvh,chars/hero.glb,abc\n", "m.csv line 2: frames 'abc' is not START-END"),
    ("clip,character\nmocap/walk.bvh,chars/notes.txt\n", "m.csv line 2: character 'chars/notes.txt' is not a"),
    ("clip,character\nmocap/walk.bvh,chars/hero.glb,extra\n", "m.csv line 2: 3 cells for 2 columns"),
    ("# only a comment\n", "is empty"),
])
def test_bad_csv_names_the_line(lib, text, message):
    m = touch(lib / "m.csv", text)
    with pytest.raises(InputError) as ex:
        inputs.read_manifest(str(m), {})
    assert message in str(ex.value)
    assert "\n" not in str(ex.value)


@pytest.mark.parametrize("text, message", [
    ('[\n {"clip": "mocap/walk.bvh", "character": "chars/hero.glb"},\n {"clip": "mocap/walk.bvh"}\n]',
     "m.json line 3: no character"),
    ('[\n {"clip": "mocap/walk.bvh", "character": "chars/hero.glb",}\n]', "m.json' line 2: not valid JSON"),
    ('{"jobs": [\n\n  "walk.bvh"]}', "m.json line 3: a job is a JSON object"),
    ('{"jobs": [], "defaults": {}}', "unknown key 'defaults'"),
    ('[{"clip": "mocap/walk.bvh", "character": "chars/hero.glb", "take": 2}]', "m.json line 1: unknown column"),
])
def test_bad_json_names_the_line(lib, text, message):
    m = touch(lib / "m.json", text)
    with pytest.raises(InputError) as ex:
        inputs.read_manifest(str(m), {})
    assert message in str(ex.value)


def test_row_setup_file_relative_and_checked(lib):
    touch(lib / "maps" / "heavy_map.json", "{}")
    touch(lib / "setups" / "slow.json", json.dumps({"settings": {"iterations": 300},
                                                   "target": {"bone_map_file": "../maps/heavy_map.json"}}))
    touch(lib / "setups" / "bad.json", json.dumps({"settings": {"iterations": 3}, "colour": "red"}))
    m = touch(lib / "m.csv", "clip,character,setup\nmocap/walk.bvh,chars/heavy.glb,setups/slow.json\n"
                             "mocap/run.fbx,chars/heavy.glb,setups/bad.json\n")
    shared = {"settings": {"quality": "fast", "iterations": 80}, "method": "reconform"}
    with pytest.raises(InputError) as ex:
        inputs.read_manifest(str(m), shared)
    assert "m.csv line 3" in str(ex.value) and "unknown set-up key 'colour'" in str(ex.value)
    m.write_text("clip,character,setup\nmocap/walk.bvh,chars/heavy.glb,setups/slow.json\n")
    job = inputs.read_manifest(str(m), shared)[0]
    assert job.setup["settings"] == {"quality": "fast", "iterations": 300}
    assert job.setup["target"]["bone_map_file"] == str(lib / "maps" / "heavy_map.json")


def test_shared_setup_per_character_overrides(lib):
    touch(lib / "heavy_map.json", "{}")
    setup_path = touch(lib / "setup.json", json.dumps({
        "method": "reconform", "settings": {"quality": "fast", "w_pen": 2.0},
        "target": {"preset": "unreal"},
        "characters": {"heavy": {"settings": {"w_pen": 4.0}, "target": {"bone_map_file": "heavy_map.json"}},
                       "hero.glb": {"method": "copy_rotations"}, "ghost": {"keyvert_count": 96}},
        "clips": {"walk": {"settings": {"source_ground": "track"}}}}))
    shared = inputs.load_setup(str(setup_path))
    used = set()
    jobs = inputs.glob_jobs([str(lib / "mocap" / "*.bvh")], [str(lib / "chars" / "*.glb")], shared, used=used)
    by = {j.key: j for j in jobs}
    assert sorted(by) == ["heavy/jump/reconform-fast", "heavy/walk/reconform-fast", "hero/jump/copy_rotations",
                          "hero/walk/copy_rotations"]
    heavy_walk = by["heavy/walk/reconform-fast"].setup
    assert heavy_walk["settings"] == {"quality": "fast", "w_pen": 4.0, "source_ground": "track"}
    # a role's bone map is replaced whole: the override's file, not the shared preset as well
    assert heavy_walk["target"] == {"bone_map_file": str(lib / "heavy_map.json")}
    assert by["heavy/jump/reconform-fast"].setup["settings"] == {"quality": "fast", "w_pen": 4.0}
    hero_walk = by["hero/walk/copy_rotations"]
    assert hero_walk.method == "copy_rotations" and hero_walk.setup["target"] == {"preset": "unreal"}
    assert "characters" not in heavy_walk and "clips" not in heavy_walk
    assert inputs.unused_overrides(shared, used) == ["characters['ghost']"]


def test_bad_setup_messages(lib):
    for text, message in [('{"settings": 3}', "'settings' must be a JSON object"),
                          ('{"method": "magic"}', "method 'magic' is not one of"),
                          ('{"characters": {"hero": {"characters": {}}}}', "unknown set-up key 'characters'"),
                          ('{"clips": {"walk": {"baseline_metrics": "no"}}}', "'baseline_metrics' must be true or false"),
                          ('{"target": {"bone_map_file": "nowhere.json"}}', "bone_map_file"),
                          ('{"method": "reconform",\n "settings": {]}', "line 2: not valid JSON")]:
        p = touch(lib / "s.json", text)
        with pytest.raises(InputError) as ex:
            inputs.load_setup(str(p))
        assert message in str(ex.value), (text, str(ex.value))


def test_globs_every_pair_and_messages(lib):
    jobs = inputs.glob_jobs([str(lib / "mocap" / "*")], [str(lib / "chars" / "*")], {}, frames=(1, 20))
    assert len(jobs) == 6 and all(j.frames == (1, 20) for j in jobs)        # notes.txt is not a character
    assert jobs[0].key.startswith("heavy/") and jobs[-1].key == "hero/walk_f1-20/copy_rotations"
    nested = touch(lib / "mocap" / "day2" / "walk2.bvh")
    jobs = inputs.glob_jobs([str(lib / "mocap" / "**" / "*.bvh")], [str(lib / "chars" / "hero.glb")], {})
    assert str(nested) in [j.clip for j in jobs] and len(jobs) == 3
    with pytest.raises(InputError, match=r"--motions '.*\*\.fbx' matches no"):
        inputs.glob_jobs([str(lib / "chars" / "*.fbx")], [str(lib / "chars" / "*.glb")], {})
    with pytest.raises(InputError, match="--characters"):
        inputs.glob_jobs([str(lib / "mocap" / "*.bvh")], [str(lib / "nowhere.glb")], {})


def test_two_jobs_writing_one_folder_are_refused(lib):
    touch(lib / "other" / "hero.fbx")
    jobs = inputs.glob_jobs([str(lib / "mocap" / "walk.bvh")],
                            [str(lib / "chars" / "hero.glb"), str(lib / "other" / "hero.fbx")], {})
    with pytest.raises(InputError, match="both write 'hero/walk/copy_rotations'"):
        inputs.check_unique(jobs)


def test_frames_forms():
    assert inputs.parse_frames("1-20", "x") == (1, 20)
    assert inputs.parse_frames("1 20", "x") == (1, 20)
    assert inputs.parse_frames("-5:10", "x") == (-5, 10)
    assert inputs.parse_frames([3, 3], "x") == (3, 3)
    assert inputs.parse_frames("", "x") is None
    assert inputs.job_key("/a/b c.bvh", "/d/e.glb", "Take/1", (1, 2)) == "e/b_c_Take_1_f1-2/copy_rotations"


def test_the_method_and_preset_are_part_of_the_key(lib):
    touch(lib / "rc.json", json.dumps({"method": "reconform"}))
    touch(lib / "rc_best.json", json.dumps({"method": "reconform", "settings": {"quality": "best"}}))
    m = touch(lib / "m.csv", "clip,character,setup\nmocap/walk.bvh,chars/hero.glb,\n"
                             "mocap/walk.bvh,chars/hero.glb,rc.json\nmocap/walk.bvh,chars/hero.glb,rc_best.json\n")
    jobs = inputs.read_manifest(str(m), {"settings": {"quality": "fast"}})   # a preset copy-rotations ignores
    assert [j.key for j in jobs] == ["hero/walk/copy_rotations", "hero/walk/reconform-fast", "hero/walk/reconform-best"]
    inputs.check_unique(jobs)                                   # one clip, three methods: three folders
    assert [inputs.key_parts(j.key) for j in jobs][2] == ("hero", "walk", "reconform-best")
    assert inputs.method_id({"method": "reconform"}) == "reconform-balanced"
    with pytest.raises(InputError, match="both write 'hero/walk/reconform-fast'"):
        inputs.check_unique(jobs + jobs[1:2])
