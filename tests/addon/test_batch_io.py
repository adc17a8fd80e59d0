"""tools/batch_io.py without Blender: outputs are checked before any work, staged beside their final place and
renamed into place all together; a failure at any point leaves no output and no folder it created; the console
keeps Blender's chatter (C-level writes to file descriptors 1 and 2 included) out of the command's output."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tools.batch_io import OutputError, Outputs


def test_check_refuses_unwritable_paths_and_leaves_nothing(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = [
        ([("--out", str(a_file / "o.blend"))], f"--out {a_file / 'o.blend'}: '{a_file}' is a file, not a folder."),
        ([("--report", str(tmp_path))], f"--report {tmp_path}: is a folder; give a file path."),
        ([("--export", "/proc/reconform/x.fbx")], "--export /proc/reconform/x.fbx: cannot create files in '/proc'"),
        ([("--out", str(tmp_path / "a.blend")), ("--export", str(tmp_path / "a.blend"))],
         f"--export {tmp_path / 'a.blend'}: the same file is also given to --out."),
    ]
    for paths, message in cases:
        with pytest.raises(OutputError) as e:
            Outputs(paths).check()
        assert str(e.value).startswith(message), str(e.value)
    Outputs([("--out", str(tmp_path / "new" / "deeper" / "o.blend"))]).check()   # folders to create: fine
    assert sorted(os.listdir(tmp_path)) == ["a_file"]


def test_stage_commit_and_discard(tmp_path):
    final = {"blend": tmp_path / "out" / "r.blend", "gltf": tmp_path / "out" / "g.gltf",
             "report": tmp_path / "rep" / "r.json"}
    (tmp_path / "rep").mkdir()
    old_report = final["report"]
    old_report.write_text("previous run")
    outs = Outputs([(k, str(v)) for k, v in final.items()])
    outs.check()
    staged = {k: outs.stage(str(v)) for k, v in final.items()}
    for k, path in staged.items():
        hidden = os.path.relpath(path, final[k].parent).split(os.sep)[0]   # a hidden file, or folder (.gltf)
        assert hidden.startswith(".") and not hidden.startswith("..")
        assert os.path.exists(final[k]) == (k == "report")
        with open(path, "w") as f:
            f.write(k)
    with open(os.path.join(os.path.dirname(staged["gltf"]), "g.bin"), "w") as f:   # the .gltf's buffer
        f.write("bin")
    assert old_report.read_text() == "previous run"   # nothing is final before the commit
    outs.commit()
    assert final["blend"].read_text() == "blend" and final["gltf"].read_text() == "gltf"
    assert (final["gltf"].parent / "g.bin").read_text() == "bin" and final["report"].read_text() == "report"
    assert sorted(os.listdir(final["blend"].parent)) == ["g.bin", "g.gltf", "r.blend"]
    assert sorted(os.listdir(final["report"].parent)) == ["r.json"]
    # a run that fails after staging: nothing of it stays, neither files nor the folders it made
    outs = Outputs([("--out", str(tmp_path / "new" / "deeper" / "o.blend")), ("--report", str(final["report"]))])
    outs.check()
    for p in (outs.stage(str(tmp_path / "new" / "deeper" / "o.blend")), outs.stage(str(final["report"]))):
        with open(p, "w") as f:
            f.write("half")
    outs.discard()
    assert not (tmp_path / "new").exists() and final["report"].read_text() == "report"
    assert sorted(os.listdir(final["report"].parent)) == ["r.json"]


def test_console_captures_c_level_output_unless_verbose(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tools.batch_io import Console
        c = Console(verbose=sys.argv[1] == "verbose")
        os.write(1, b"C-level chatter\\n")
        print("python chatter", flush=True)
        os.write(2, b"C-level warning\\n")
        c.out.write("[reconform] own line\\n")
        c.error("the one error line")
        c.restore()
        print("after restore", flush=True)
    """)
    for mode, out, err in (("quiet", "[reconform] own line\nafter restore\n", "error: the one error line\n"),
                           ("verbose", "C-level chatter\npython chatter\n[reconform] own line\nafter restore\n",
                            "C-level warning\nerror: the one error line\n")):
        p = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stdout, p.stderr) == (0, out, err)
