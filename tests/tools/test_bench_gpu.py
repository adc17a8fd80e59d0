"""tools/bench/bench_gpu.py (make bench's GPU lines): its comparisons run on the CPU here (the suite never needs a GPU),
what it says without CUDA, and a case pickled under the installed extension's module names read back."""

import pickle

import numpy as np
import pytest
import torch

from core.pipeline import retarget as rt
from core.solver import SolverSettings
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion
from tools.bench import bench_gpu
from tools.bench.common import tile

SETTINGS = SolverSettings(iterations=4, num_threads=2)


@pytest.fixture(scope="module")
def case():
    src = make_humanoid()
    return src, walk_motion(src, frames=20), make_humanoid(scale=0.8, girth=1.4, name="tgt")


def _section(case, **kw):
    src, mo, tgt = case
    lines = []
    targets = bench_gpu.section(lambda s="": lines.append(s), rt, lambda m, n: tile(Motion, m, n), src, mo, tgt, SETTINGS,
                                frames=(20, 30), cpu_frames=(20,), device="cpu", **kw)
    return lines, targets


def test_the_section_compares_a_device_with_the_cpu(case):
    lines, targets = _section(case)
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ") and line[2].isdigit()}
    assert set(rows) == {"20", "30"}
    # the "device" is the CPU itself: no rotation differs, the run twice is identical, the CPU ran 20 frames only
    assert "| 0.000° / 0.000° / 0.0000° |" in rows["20"] and rows["20"].endswith("| identical |")
    assert "| not run |" in rows["30"]
    tol = [k for k in targets if k.startswith("GPU rotations within")]
    assert len(tol) == 1 and targets[tol[0]][1]
    assert targets["GPU: a reproducible solve run twice gives identical rotations and locations"] == (
        "2 of 2 lengths identical", True)
    assert not any("frames/s" in k for k in targets)          # the speed target starts at 1 000 frames
    # no CUDA graph on the CPU: the "graphed" and the eager solve are one and the same computation
    assert targets["GPU: the pose map as a CUDA graph gives the eager solve's rotations and locations"] == (
        "2 of 2 lengths identical", True)
    assert all(row.count("| identical |") == 2 for row in rows.values())


def test_a_result_off_by_more_than_the_tolerance_fails(case, monkeypatch):
    # the turned CPU result below is also what the float64 run is compared with: the fixed tolerance alone decides
    monkeypatch.setattr(bench_gpu, "ROUNDING_FACTOR", 0.0)
    src, mo, tgt = case
    cpu = rt.run(rt.Retarget(src, tile(Motion, mo, 20), tgt, rt.RetargetOptions(settings=SETTINGS, metrics=False,
                                                                              conflicts=False))).motion
    rot = cpu.rotations.copy()
    half = np.radians(bench_gpu.TOLERANCE_DEG[0] + 1.0) / 2       # one bone, one frame, turned past the largest
    q = np.array([np.cos(half), np.sin(half), 0.0, 0.0])
    w1, v1, w2, v2 = rot[5, 3, 0], rot[5, 3, 1:], q[0], q[1:]
    rot[5, 3] = np.concatenate([[w1 * w2 - v1 @ v2], w1 * v2 + w2 * v1 + np.cross(v1, v2)])
    _, targets = _section(case, cpu_results={20: Motion(rot, cpu.locations, cpu.fps, cpu.frame_start)})
    (label,) = [k for k in targets if k.startswith("GPU rotations within")]
    measured, ok = targets[label]
    assert not ok and measured.startswith(f"20 frames {bench_gpu.TOLERANCE_DEG[0] + 1.0:.3f}°")


def test_the_allowed_angles_follow_the_solves_own_rounding_above_the_fixed_tolerance():
    tol, k = bench_gpu.TOLERANCE_DEG, bench_gpu.ROUNDING_FACTOR
    assert bench_gpu.allowed(None) == tol
    f64 = (tol[0] / k + 1.0, tol[1] / k / 2, tol[2] / k * 3)     # above, below, above the fixed tolerance
    assert bench_gpu.allowed(f64) == pytest.approx((k * f64[0], tol[1], k * f64[2]))


def test_the_rounding_scale_nudges_the_inputs_by_about_one_float32_rounding(case):
    _, mo, _ = case
    a, b = bench_gpu.nudged(mo, 0), bench_gpu.nudged(mo, 1)
    assert np.array_equal(a.rotations, bench_gpu.nudged(mo, 0).rotations)       # seeded: one nudge per seed
    nz = mo.rotations != 0
    rel = np.abs(a.rotations[nz] / mo.rotations[nz] - 1.0)
    assert 0 < rel.max() < 1e-6 and (a.rotations[~nz] == 0).all() and not np.array_equal(a.rotations, b.rotations)
    assert not np.array_equal(a.locations, mo.locations) and (a.fps, a.frame_start) == (mo.fps, mo.frame_start)
    assert bench_gpu.rounding_scale([(1.0, 0.2, 0.05), (0.5, 0.3, 0.01)]) == (1.0, 0.3, 0.05)


def test_without_cuda_the_section_says_so_and_measures_nothing(case, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    lines = []
    src, mo, tgt = case
    assert bench_gpu.section(lines.append, rt, None, src, mo, tgt, SETTINGS) == {}
    assert len(lines) == 1 and lines[0].startswith("GPU: not measured")


def test_a_case_pickled_under_the_extension_names_loads_as_this_checkout(case, tmp_path):
    _, mo, _ = case
    raw = pickle.dumps(dict(motion=mo), protocol=0)        # text opcodes: the module name can be rewritten
    assert b"core.types" in raw
    raw = raw.replace(b"core.types", b"bl_ext.reconform_bench.reconform.core.types")
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(raw)
    path = tmp_path / "case.pkl"
    path.write_bytes(raw)
    with open(path, "rb") as f:
        back = bench_gpu._CoreUnpickler(f).load()["motion"]
    assert isinstance(back, Motion) and np.array_equal(back.rotations, mo.rotations)


def test_setting_overrides_read_as_the_benches_read_them():
    from tools.bench.common import setting_overrides
    over = setting_overrides(["w_head=0", "compile=true", "source_ground=track", "w_pen=7.5"])
    assert over == {"w_head": 0, "compile": True, "source_ground": "track", "w_pen": 7.5}
    # Python's spelling of a flag is a flag, not the (truthy) text 'False'
    assert setting_overrides(["compile=False", "source_ground=(0.01, 0.02)", "device=cuda"]) == {
        "compile": False, "source_ground": (0.01, 0.02), "device": "cuda"}
    s = SolverSettings.preset("balanced", **over)
    assert (s.w_head, s.compile, s.source_ground) == (0, True, "track")


@pytest.mark.slow
def test_the_group_check_runs_the_joint_solve_its_conflicts_and_its_re_solve_twice():
    lines = []
    targets = bench_gpu.group_check(lines.append, device="cpu", frames=30, iterations=20)
    (label, (measured, ok)), = targets.items()
    assert "conflicts and its re-solve" in label and ok and measured == "identical"
    assert any(line.startswith("Its conflicts on cpu:") and "the same twice" in line and "twice identical" in line
               for line in lines)


def test_a_module_constant_is_set_for_a_run_and_an_unknown_one_refused(monkeypatch):
    from core.solver import group, job, optim, partners
    from tools.bench.common import set_constants
    for mod, name in ((group, "PARTNER_STEP"), (partners, "PARTNER_CONTACT_STATE"), (job, "DTYPE"),
                      (optim, "DETERMINISTIC")):
        monkeypatch.setattr(mod, name, getattr(mod, name))      # put back after the test
    set_constants(["core.solver.group.PARTNER_STEP=0.75"], package="")
    assert group.PARTNER_STEP == 0.75
    # a flag and a text as Python spells them (the settings that became constants)
    set_constants(["core.solver.partners.PARTNER_CONTACT_STATE=True", "core.solver.optim.DETERMINISTIC=False",
                   "core.solver.job.DTYPE='float64'"], package="")
    assert (partners.PARTNER_CONTACT_STATE, optim.DETERMINISTIC, job.DTYPE) == (True, False, "float64")
    with pytest.raises(SystemExit, match="no module constant core.solver.group.NO_SUCH"):
        set_constants(["core.solver.group.NO_SUCH=1"], package="")
