"""tools/bench/bench_zoo.py: the morphology zoo's bodies are valid and as extreme as their names say."""

import numpy as np
import pytest

from core.body import BodyParams, make_body
from tools.bench.bench_zoo import BODIES, CLIPS, REST_POSE


@pytest.fixture(scope="module")
def zoo():
    def extent(mesh):
        v = mesh.rest_verts
        h = float(np.ptp(v[:, 2]))
        waist = v[(v[:, 2] > 0.52 * h) & (v[:, 2] < 0.62 * h) & (np.abs(v[:, 0]) < 0.12 * h)]
        return {"height": h, "depth": float(np.ptp(waist[:, 1])), "verts": v}   # depth: front to back at the waist
    neutral = make_body(BodyParams(name="neutral"), pose="T")
    out = {"neutral": (neutral, extent(neutral[1]))}
    for name, kw in BODIES.items():
        body = make_body(BodyParams(name=name, **kw), pose=REST_POSE[name])
        out[name] = (body, extent(body[1]))
    return out


@pytest.mark.slow
def test_zoo_spans_the_shapes_it_names(zoo):
    assert len(BODIES) >= 8 and set(REST_POSE) == set(BODIES) and set(REST_POSE.values()) == {"T", "A"}
    e = {k: v[1] for k, v in zoo.items()}
    assert e["very_tall"]["height"] > 2.1 and e["child"]["height"] < 1.2
    assert e["big_belly"]["depth"] > 1.3 * e["neutral"]["depth"] * e["big_belly"]["height"] / e["neutral"]["height"]
    assert e["very_thin"]["depth"] < 0.85 * e["neutral"]["depth"] * e["very_thin"]["height"] / e["neutral"]["height"]

    def arm_over_height(name):
        """Shoulder-to-wrist distance over the body's height, from the rest skeleton (identity bone map)."""
        skel = zoo[name][0][0]
        g = skel.rest_global[:, :3, 3]
        return float(np.linalg.norm(g[skel.index("left_hand")] - g[skel.index("left_upper_arm")])) / e[name]["height"]
    assert arm_over_height("long_arms") > 1.15 * arm_over_height("neutral")
    assert arm_over_height("short_arms") < 0.85 * arm_over_height("neutral")
    for name, (body, ext) in zoo.items():
        skel, mesh, bone_map = body
        assert mesh.num_verts > 1000 and np.isfinite(ext["verts"]).all(), name
        assert {"hips", "left_hand", "right_hand", "head"} <= set(bone_map), name


def test_zoo_clips_have_self_contacts():
    labels = [c[0] for c in CLIPS]
    assert len(CLIPS) >= 4 and len(set(labels)) == len(labels)
    assert CLIPS[0][1] is None           # the generated demo clip needs no asset: the zoo runs without ../shared


@pytest.mark.parametrize("spec", ["slash", "slash:", "walk:big_belly", "slash:huge_belly"])
def test_a_zoo_case_that_is_not_clip_colon_body_is_named_before_anything_loads(spec):
    """``chosen_cases`` (``case_lines.py``, ``contact_depth_sources.py``, ``const_timing.py``): a ``--zoo`` spec that is
    not CLIP:BODY of the zoo's clips and bodies stops with a message naming it and the choices, before any clip or
    body is loaded (the mods and loader are never touched)."""
    from types import SimpleNamespace
    from tools.bench.bench_zoo import chosen_cases
    with pytest.raises(SystemExit, match="expected CLIP:BODY") as e:
        chosen_cases(SimpleNamespace(cases=[], zoo=[spec]), mods=None, loader=None)
    assert repr(spec) in str(e.value) and "big_belly" in str(e.value) and CLIPS[0][0] in str(e.value)
