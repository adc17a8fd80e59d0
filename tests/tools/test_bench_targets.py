"""tools/bench/bench_targets.py: issue 11's PASS/FAIL lines of `make bench`, on hand-made metrics."""

import math

from tools.bench.bench_targets import case_rows, case_targets, every_case, mean_targets


def _metrics(**kw):
    m = dict(jerk_mean=100.0, source_jerk_mean=100.0, self_pen_mean=0.001, grounded_f1=0.96, locked_f1=0.94,
             floor_pen_mean=0.0001, contact_f1=0.8, mesh_pen_mean=0.0005, contact_depth_p95=0.005,
             contact_depth_p95_height=0.005 / 1.7)
    m.update(kw)
    return m


def test_a_case_passes_every_target_and_fails_each_one_alone():
    init = _metrics(jerk_mean=110.0, self_pen_mean=0.002, floor_pen_mean=0.001, mesh_pen_mean=0.001)
    ok = case_targets(init, _metrics(), 1.7, 1.7)
    assert len(ok) == 8 and all(t.passed for t in ok), ok
    fails = {
        "joint jerk ≤ copy-rot": _metrics(jerk_mean=111.0, source_jerk_mean=200.0),
        "jerk per unit of height ≤ 1.05 × source": _metrics(jerk_mean=106.0, source_jerk_mean=100.0),
        "self-penetration ≤ copy-rot": _metrics(self_pen_mean=0.0021),
        "mesh self-penetration ≤ copy-rot": _metrics(mesh_pen_mean=0.0011),
        "contact depth p95 ≤ 1 % of height": _metrics(contact_depth_p95=0.018, contact_depth_p95_height=0.018 / 1.7),
        "grounded F1 ≥ 0.95": _metrics(grounded_f1=0.949),
        "foot-locked F1 ≥ 0.93": _metrics(locked_f1=0.929),
        "floor penetration ≥ 80 % below copy-rot": _metrics(floor_pen_mean=0.00021),
    }
    for label, ours in fails.items():
        got = {t.label: t.passed for t in case_targets(init, ours, 1.7, 1.7)}
        assert not got[label] and sum(not p for p in got.values()) == 1, (label, got)


def test_jerk_is_read_per_unit_of_height_and_nan_f1_passes():
    # a target twice as tall with twice the source's jerk has the source's jerk per unit of height
    got = {t.label: (t.measured, t.passed)
           for t in case_targets(_metrics(jerk_mean=300.0), _metrics(jerk_mean=200.0), 1.0, 2.0)}
    assert got["jerk per unit of height ≤ 1.05 × source"][1]
    assert got["jerk per unit of height ≤ 1.05 × source"][0].startswith("1.000")
    # at the bound's third decimal, the line prints the decimals that say which side it is on
    for jerk, text, ok in ((105.03, "1.0503 ×", False), (104.996, "1.04996 ×", True), (105.0, "1.050 ×", True)):
        line = {t.label: t for t in case_targets(_metrics(), _metrics(jerk_mean=jerk), 1.7, 1.7)}[
            "jerk per unit of height ≤ 1.05 × source"]
        assert line.measured.startswith(text) and line.passed == ok, (jerk, line)
    nan = {t.label: (t.measured, t.passed) for t in case_targets(_metrics(), _metrics(grounded_f1=math.nan), 1.7, 1.7)}
    assert nan["grounded F1 ≥ 0.95"] == ("n/a", True)
    # copy-rotations with no floor penetration: passes only with none
    zero = _metrics(floor_pen_mean=0.0)
    assert {t.label: t.passed for t in case_targets(zero, zero, 1.7, 1.7)}["floor penetration ≥ 80 % below copy-rot"]
    assert not {t.label: t.passed for t in case_targets(zero, _metrics(floor_pen_mean=1e-6), 1.7, 1.7)}[
        "floor penetration ≥ 80 % below copy-rot"]


def test_means_over_cases():
    inits = [_metrics(self_pen_mean=0.002, contact_f1=0.3, mesh_pen_mean=0.002),
             _metrics(self_pen_mean=0.004, contact_f1=0.2, mesh_pen_mean=0.002)]
    good = [_metrics(self_pen_mean=0.001, contact_f1=0.95), _metrics(self_pen_mean=0.002, contact_f1=0.8)]
    assert all(p for _, _, p in mean_targets(inits, good))
    bad = [_metrics(self_pen_mean=0.001, contact_f1=0.9), _metrics(self_pen_mean=0.0021, contact_f1=0.69)]
    assert [p for _, _, p in mean_targets(inits, bad)] == [False, True, False]


def test_mesh_lines_over_cases_and_without_source_contacts():
    inits = [_metrics(mesh_pen_mean=0.002), _metrics(mesh_pen_mean=0.004)]
    good = [_metrics(mesh_pen_mean=0.001), _metrics(mesh_pen_mean=0.002)]
    labels = {lab: p for lab, _, p in mean_targets(inits, good)}
    assert labels["mesh self-penetration ≤ 0.5 × copy-rot's (mean)"]
    bad = [_metrics(mesh_pen_mean=0.001), _metrics(mesh_pen_mean=0.0021)]
    labels = {lab: p for lab, _, p in mean_targets(inits, bad)}
    assert not labels["mesh self-penetration ≤ 0.5 × copy-rot's (mean)"]
    # no source contact: nothing to sink into, the line passes as n/a
    got = {t.label: (t.measured, t.passed)
           for t in case_targets(_metrics(), _metrics(contact_depth_p95_height=math.nan), 1.7, 1.7)}
    assert got["contact depth p95 ≤ 1 % of height"] == ("n/a", True)
    # metrics from before the mesh measure: the lines are left out, not failed
    old = {k: v for k, v in _metrics().items() if not k.startswith(("mesh", "contact_depth"))}
    assert len(case_targets(old, old, 1.7, 1.7)) == 6 and len(mean_targets([old], [old])) == 2


def test_a_failure_within_the_noise_margin_is_named_and_still_fails():
    init = _metrics(jerk_mean=100.0, mesh_pen_mean=0.0)
    # jerk 2 % over copy-rotations' (margin 3 %), mesh 1e-5 of the volume over none (margin 2e-5): the reports' "same"
    near = {t.label: t for t in case_targets(init, _metrics(jerk_mean=102.0, mesh_pen_mean=1e-5), 1.7, 1.7)}
    for label in ("joint jerk ≤ copy-rot", "mesh self-penetration ≤ copy-rot"):
        t = near[label]
        assert not t.passed and t.within_noise and t.measured.endswith("(within the noise margin)"), t
    # beyond the margin: a plain failure
    far = {t.label: t for t in case_targets(init, _metrics(jerk_mean=104.0, mesh_pen_mean=3e-5), 1.7, 1.7)}
    for label in ("joint jerk ≤ copy-rot", "mesh self-penetration ≤ copy-rot"):
        assert not far[label].passed and not far[label].within_noise and "noise" not in far[label].measured
    # a difference the line fails on is printed with the decimals it takes to read it: not "0.000 % vs 0.000 %"
    assert near["mesh self-penetration ≤ copy-rot"].measured.startswith("0.001 % vs 0.000 % of the body volume")
    tiny = {t.label: t.measured for t in case_targets(init, _metrics(jerk_mean=102.0, mesh_pen_mean=3e-8), 1.7, 1.7)}
    assert tiny["mesh self-penetration ≤ copy-rot"].startswith("0.000003 % vs 0.000000 %")
    same = {t.label: t.measured for t in case_targets(init, _metrics(mesh_pen_mean=0.0), 1.7, 1.7)}
    assert same["mesh self-penetration ≤ copy-rot"].startswith("0.000 % vs 0.000 %")
    # jerk per unit of height over its bound: within the jerk's margin (3 %) or beyond it
    for jerk, noise in ((106.0, True), (109.0, False)):
        line = {t.label: t for t in case_targets(init, _metrics(jerk_mean=jerk), 1.7, 1.7)}[
            "jerk per unit of height ≤ 1.05 × source"]
        assert not line.passed and line.within_noise == noise and ("noise" in line.measured) == noise, line
    # passing lines and lines that are neither "≤ copy-rot" nor the jerk's bound never read it
    assert not any(t.within_noise for t in case_targets(init, _metrics(jerk_mean=99.0, locked_f1=0.929), 1.7, 1.7))
    # over the cases: every failure named, those within the margin apart
    text, passed = every_case([("a", near["joint jerk ≤ copy-rot"]), ("b", far["joint jerk ≤ copy-rot"]),
                               ("c", case_targets(init, _metrics(jerk_mean=90.0), 1.7, 1.7)[0])])
    assert not passed and text == "1 of 3 cases; fails: a, b (1 within the noise margin: a)"
    assert every_case([("c", case_targets(init, _metrics(jerk_mean=90.0), 1.7, 1.7)[0])]) == ("1 of 1 cases", True)


def test_hand_contacts_held_read_with_the_decimals_a_difference_takes():
    """Whole percents, unless two shares that differ would read alike: a grip held on 333 of 334 touches against
    copy-rotations' 334 fails within the noise margin and must not read "100 % vs 100 %"."""
    hands = dict(source_hand_contacts=334.0, hand_contact_gap_p95=0.01, hand_contact_sunk=0.0)
    init = _metrics(hand_contact_held=1.0, **hands)
    line = {t.label: t for t in case_targets(init, _metrics(hand_contact_held=333 / 334, **hands), 1.7, 1.7)}
    held = line["hand contacts held ≥ copy-rot"]
    assert not held.passed and held.within_noise and held.measured.startswith("99.7 % vs 100.0 % of the source's 334")
    line = {t.label: t for t in case_targets(init, _metrics(hand_contact_held=0.9, **hands), 1.7, 1.7)}
    assert line["hand contacts held ≥ copy-rot"].measured.startswith("90 % vs 100 % of the source's 334")


def test_case_rows_prints_each_line_of_each_case_and_groups_them_by_line():
    init = _metrics(jerk_mean=100.0)
    cases = [("a", init, _metrics(jerk_mean=90.0), 1.7, 1.7), ("b", init, _metrics(jerk_mean=110.0), 1.7, 1.7)]
    printed = []
    per_target = case_rows(printed.append, cases)
    lines = case_targets(init, _metrics(jerk_mean=90.0), 1.7, 1.7)
    assert len(printed) == 2 * len(lines) and printed[0].startswith(f"| a | {lines[0].label} | ")
    assert printed[len(lines)] == "| b | joint jerk ≤ copy-rot | 110.0 vs 100.0 m/s³ | FAIL |"
    assert list(per_target) == [t.label for t in lines]
    assert [case for case, _ in per_target["joint jerk ≤ copy-rot"]] == ["a", "b"]
    assert every_case(per_target["joint jerk ≤ copy-rot"]) == ("1 of 2 cases; fails: b", False)
