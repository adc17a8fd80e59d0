"""core.rig.parts: which body part a bone or a vertex belongs to (limb by summed weight, segment by dominant bone)."""

import numpy as np
import pytest

from core.body import BodyParams, fit_body_to_skeleton, make_body
from core.bonemap import detect_bone_map
from core.rig.humanoid import CORE_BONES, LIMBS
from core.rig.parts import bone_canonical, limb_labels, segment_weights, vertex_segments
from core.types import Character

from .rigs import make_skeleton, object_matrix
from .synth import make_humanoid


def _fitted(style, **kw):
    sk = make_skeleton(style, **kw)
    bm = detect_bone_map(sk).bone_map
    return Character(sk, fit_body_to_skeleton(sk, bm), bm)


def _partial_body():
    """A generated body whose bone map lacks the chest, a clavicle and a knee (vertices go to ancestors)."""
    sk, mesh, bm = make_body(BodyParams(resolution=0.024, name="lowpoly"), pose="A")
    bm = {c: b for c, b in bm.items() if c not in ("chest", "left_shoulder", "right_lower_leg")}
    return Character(sk, mesh, bm)


CASES = {
    "synth": lambda: make_humanoid(),
    "synth_heavy_turned": lambda: make_humanoid(scale=0.8, girth=2.2, leg=0.8, name="fat",
                                                object_matrix=object_matrix(0.01, z_deg=30)),
    "fitted_mixamo": lambda: _fitted("mixamo"),
    "fitted_unreal_extra_root": lambda: _fitted("unreal", extra_root=True, arm_angle=45, roll_seed=3),
    "fitted_rigify": lambda: _fitted("rigify"),
    "generated_partial_map": _partial_body,
}


def _reference_segments(ch):
    """The definition, written out bone by bone: a vertex's dominant bone, or its nearest ancestor mapped to a
    core canonical bone (the metrics' reading before core.rig.parts existed)."""
    sk = ch.skeleton
    canon = {sk.index(b): c for c, b in ch.bone_map.items() if c in CORE_BONES and b in sk.names}
    bones = sorted(set(canon.values()), key=CORE_BONES.index)
    seg = []
    for j in ch.mesh.dominant_bones():
        k = int(j)
        while k >= 0 and k not in canon:
            k = int(sk.parents[k])
        seg.append(bones.index(canon[k]) if k >= 0 else -1)
    return np.array(seg), bones, [sk.index(ch.bone_map[c]) for c in bones]


@pytest.mark.parametrize("case", sorted(CASES))
def test_vertex_segments_follow_the_definition(case):
    ch = CASES[case]()
    seg, bones, ids = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    seg_m, bones_m, ids_m = _reference_segments(ch)
    assert seg.shape == (ch.mesh.num_verts,) and np.array_equal(seg, seg_m)
    assert bones == bones_m and ids == ids_m
    assert (seg >= 0).all()


def test_segments_fall_back_to_the_nearest_mapped_core_ancestor():
    ch = _partial_body()
    seg, bones, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    assert "chest" not in bones and "left_shoulder" not in bones and "right_lower_leg" not in bones
    dom = ch.mesh.dominant_bones()
    names = [ch.skeleton.names[j] for j in dom]
    own = {"chest": "spine", "left_shoulder": "upper_chest", "right_lower_leg": "right_upper_leg",
           "left_index_2": "left_hand", "right_toes": "right_toes"}
    for bone, expected in own.items():
        m = np.array([n == bone for n in names])
        assert m.any() and {bones[s] for s in seg[m]} == {expected}, bone


@pytest.mark.parametrize("case", ["synth", "generated_partial_map"])
def test_segment_weights_sum_each_segment_s_bones_weights(case):
    """A vertex's weight on a segment is the sum of its skin weights on the bones that segment owns (its own, and the
    unmapped ones under it, as for ``vertex_segments``): rows sum to the vertex's mapped weight, the dominant segment
    holds the largest share, and a vertex where two segments meet is moved by both."""
    ch = CASES[case]()
    seg, bones, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    W = segment_weights(ch.skeleton, ch.mesh, ch.bone_map)
    assert W.shape == (ch.mesh.num_verts, len(bones))
    np.testing.assert_allclose(W.sum(1), ch.mesh.weight_values.sum(1), atol=1e-9)     # every bone is mapped here
    dominant = W[np.arange(len(seg)), seg]
    assert (dominant >= 0.5 * W.max(1) - 1e-9).all()
    mixed = (W > 0.2).sum(1) >= 2
    assert mixed.any() and not mixed.all()
    v = int(np.argmax(mixed))                           # written out: its weights bone by bone
    canon = bone_canonical(ch.skeleton, ch.bone_map)
    expected = np.zeros(len(bones))
    for b, w in zip(ch.mesh.weight_bones[v], ch.mesh.weight_values[v]):
        c = canon[b]
        while c is not None and c not in bones:         # an unmapped core bone's vertices go to its mapped ancestor
            b = ch.skeleton.parents[b]
            c = canon[b] if b >= 0 else None
        if c is not None:
            expected[bones.index(c)] += w
    np.testing.assert_allclose(W[v], expected, atol=1e-9)


def test_bone_canonical_and_limb_labels():
    sk = make_skeleton("mixamo", extra_root=True)
    bm = detect_bone_map(sk).bone_map
    canon = bone_canonical(sk, bm)
    assert canon[0] is None                                                  # unmapped root
    assert canon[sk.index(bm["left_hand"])] == "left_hand"
    assert canon[sk.index("mixamorig:HeadTop_End")] == "head"               # unmapped leaves: their parent's
    assert canon[sk.index("mixamorig:LeftToe_End")] == "left_toes"
    ch = _partial_body()
    lab = limb_labels(ch.skeleton, ch.mesh, ch.bone_map)
    assert lab.shape == (ch.mesh.num_verts,) and lab.min() >= 0
    dom = ch.mesh.dominant_bones()
    hand = np.array([ch.skeleton.names[j].startswith("left_index") for j in dom])
    assert (lab[hand] == LIMBS.index("left_hand")).all()
