"""core.metrics.report: every metric the core measures has a name, a unit and a direction; values print rounded with their
unit; the result is compared with copy-rotations; one verdict line per target (issue 15, item 11)."""

import math

import pytest

from core.metrics import report
from core.metrics.scores import evaluate, evaluation
from tests.core.synth import make_humanoid, walk_motion


@pytest.fixture(scope="module")
def measured():
    ch = make_humanoid()
    clip = walk_motion(ch, frames=24, clap=True)
    return evaluate(ch, clip, ch, clip)


def test_every_metric_evaluate_returns_is_described(measured):
    unknown = sorted(set(measured) - set(report.BY_KEY))
    assert not unknown, f"metrics without a name, unit and direction in core.metrics.report: {unknown}"
    for m in report.METRICS:
        assert m.label and m.better in ("", report.LOWER, report.HIGHER)
        if m.key.startswith(("floor_pen", "self_pen", "jerk")):
            assert m.unit and m.better == report.LOWER
        if m.key.endswith(("_f1", "_auc")) and not m.key.startswith("source_"):
            assert m.better == report.HIGHER


def test_values_print_rounded_with_their_units():
    assert report.format_value("floor_pen_mean", 0.012345) == "1.23 % of the surface"
    assert report.format_value("jerk_mean", 212.43) == "212 m/s³"
    assert report.format_value("grounded_f1", 0.93051) == "0.931"
    assert report.format_value("grounded_f1", 0.93051, unit=False) == "0.931"
    assert report.format_value("contact_f1", float("nan")) == "n/a" and report.format_value("contact_f1", None) == "n/a"
    assert report.format_value("self_pen_mean", -1e-9) == "0.00 % of the surface"       # no "-0.00"
    assert report.info("made_up_metric").label == "Made up metric"


def test_comparison_follows_each_metrics_direction():
    assert report.compare("floor_pen_mean", 0.001, 0.02) == "better"
    assert report.compare("grounded_f1", 0.7, 0.9) == "worse"
    assert report.compare("jerk_mean", 212.2, 211.9) == "same"                          # equal as printed
    assert report.compare("source_jerk_mean", 1.0, 2.0) is None                         # a description
    assert report.compare("contact_f1", float("nan"), 0.5) is None
    assert report.compare("mesh_pen_mean", 0.0002, 0.002) == "better"
    assert report.compare("contact_depth_p95", 0.012, 0.004) == "worse"


def test_changes_within_the_noise_read_same():
    assert report.compare("jerk_mean", 112.0, 113.0) == "same"                           # 1 m/s³ of 113
    assert report.compare("jerk_mean", 100.0, 113.0) == "better"
    assert report.compare("grounded_f1", 0.905, 0.90) == "same"
    assert report.compare("grounded_f1", 0.95, 0.90) == "better"
    assert report.compare("contact_depth_p95", 0.0102, 0.0100) == "same"                 # 0.2 mm
    assert report.compare("mesh_pen_mean", 1.00e-3, 1.04e-3) == "same"                   # within 5 %
    assert report.compare("mesh_pen_mean", 0.5e-3, 1.04e-3) == "better"


def test_no_better_side_for_the_head_turn_and_a_lost_contact_reads_lost():
    assert report.compare("head_turn_mean", 3.0, 0.0) is None
    assert report.info("head_turn_max").better == ""
    # the demo couple's hands: 0.009 held against copy-rotations' 0.002 is a contact lost, not a better one
    assert report.compare("partner_contact_f1", 0.009, 0.002) == "lost"
    assert report.compare("contact_f1", 0.05, 0.6) == "lost"
    assert report.compare("partner_kept: A's left hand ~ B's torso, 40 frames", 0.05, 0.0) == "lost"
    assert report.compare("partner_contact_f1", 0.5, 0.02) == "better"
    line = report.verdict({"partner_contact_f1": 0.009, "jerk_mean": 100.0},
                          {"partner_contact_f1": 0.002, "jerk_mean": 150.0})
    assert "lost: contacts with partners F1 0.009" in line and "beats copy-rotations on 1 of 2" in line


def test_rows_put_the_headline_first_and_carry_copy_rotations():
    metrics = {"jerk_max": 900.0, "grounded_f1": 0.93, "floor_pen_mean": 0.001, "frames": 120.0}
    reference = {"jerk_max": 800.0, "grounded_f1": 0.80, "floor_pen_mean": 0.02, "frames": 120.0}
    rows = report.metric_rows(metrics, reference)
    assert [r.info.key for r in rows] == ["grounded_f1", "floor_pen_mean", "jerk_max", "frames"]
    assert rows[0].change == "better" and rows[1].change == "better" and rows[2].change == "worse"
    assert rows[3].reference is None and rows[3].change is None and rows[3].reference_text == ""
    d = rows[1].as_dict()
    assert d["unit"] == "% of the surface" and d["better"] == "lower" and d["copy_rotations_text"] == \
        "2.00 % of the surface"
    lines = report.text_table(metrics, reference)
    lead = report.summary_lines(metrics, reference)
    assert lines[:len(lead)] == ["  " + line for line in lead] and lines[len(lead)] == ""
    table = lines[len(lead) + 1:]
    assert "copy-rotations" in table[0] and any("better" in line and "Grounded" in line for line in table)
    assert [r.info.key for r in report.metric_rows(metrics, reference, headline_only=True)] == \
        ["grounded_f1", "floor_pen_mean"]


def test_the_report_leads_with_at_most_six_lines_a_person_reads(measured):
    reference = dict(measured, jerk_mean=measured["jerk_mean"] * 2, mesh_pen_mean=measured["mesh_pen_mean"] * 3)
    lead = report.summary_lines(measured, reference)
    assert 1 <= len(lead) <= 6
    assert any(line.startswith("Through the body: mesh self-penetration, mean") and ": better)" in line
               for line in lead)
    assert any(line.startswith("Smoothness: jerk of the joints, mean") and ": better)" in line for line in lead)
    assert any(line.startswith("Feet: grounded feet F1 1.000 (copy-rotations 1.000: same)") for line in lead)
    assert report.summary_lines({}, None) == []


def test_the_verdict_names_the_three_largest_changes_and_says_when_there_are_more():
    metrics = {"grounded_f1": 0.99, "locked_f1": 0.9, "floor_pen_mean": 0.001, "jerk_mean": 200.0}
    reference = {"grounded_f1": 0.80, "locked_f1": 0.5, "floor_pen_mean": 0.02, "jerk_mean": 300.0}
    line = report.verdict(metrics, reference, "reconform")
    assert line.startswith("ReConForM beats copy-rotations on 4 of 4 measures")
    inside = line[line.index("(") + 1:line.rindex(")")]
    assert inside.count("→") == 3 and inside.endswith(", …")
    three = report.verdict(dict(metrics, jerk_mean=300.0), reference, "reconform")
    assert "…" not in three


def test_one_verdict_line_per_target():
    metrics = {"grounded_f1": 0.93, "locked_f1": 0.5, "floor_pen_mean": 0.001, "jerk_mean": 300.0}
    reference = {"grounded_f1": 0.80, "locked_f1": 0.6, "floor_pen_mean": 0.02, "jerk_mean": 300.2}
    line = report.verdict(metrics, reference, "reconform")
    assert "\n" not in line and line.startswith("ReConForM beats copy-rotations on 2 of 4 measures")
    assert "floor penetration, mean 2.00 → 0.10 % of the surface" in line
    assert "worse on feet locked F1 0.600 → 0.500" in line
    baseline = report.verdict(metrics, None, "copy_rotations")
    assert baseline.startswith("Copy Rotations: Grounded feet F1 0.930") and "\n" not in baseline
    assert report.verdict({}, None).startswith("No metrics")


def test_evaluation_reports_its_progress_and_gives_the_same_metrics(measured):
    ch = make_humanoid()
    clip = walk_motion(ch, frames=24, clap=True)
    gen = evaluation(ch, clip, ch, clip)
    fractions = []
    while True:
        try:
            fractions.append(next(gen))
        except StopIteration as done:
            result = done.value
            break
    assert fractions and fractions == sorted(fractions) and math.isclose(fractions[-1], 1.0)
    assert result.keys() == measured.keys()
    for k, v in result.items():
        assert (math.isnan(v) and math.isnan(measured[k])) or v == pytest.approx(measured[k])
