"""Errors about the target arrive before any work on the source (issue 15 item 10): ``pipeline.read_inputs``
checks the target (can it keep an Action, its mesh, its bone map, a skinned vertex on every limb that gets key
vertices) before the source clip is read, and the core checks both characters before the first key-vertex
transfer (tests/core/test_character_check.py)."""

import importlib

import pytest

from tests.addon.generated import generated_pair

bpy = pytest.importorskip("bpy")
pytestmark = pytest.mark.slow   # two generated characters per test (about 3 s)


@pytest.fixture
def pipe(addon, clean_scene, monkeypatch):
    pipe = importlib.import_module(addon.__name__ + ".reconform_addon.pipeline")
    monkeypatch.setattr(pipe, "read_motion", lambda *a, **k: pytest.fail("the source clip was read first"))
    return pipe


def test_target_bone_map_error_before_the_source_is_read(pipe):
    br = importlib.import_module(pipe.__name__.rsplit(".", 1)[0] + ".bridge")
    src, tgt = generated_pair(br, frames=4)
    with pytest.raises(pipe.CoreError, match=r"^Nothing mapped on 'Heavy': none of the bone map's bones exist"):
        pipe.read_inputs(src, tgt, method="copy_rotations", target_bone_map={"hips": "no_such_bone"})


def test_target_unskinned_limb_error_before_the_source_is_read(pipe):
    br = importlib.import_module(pipe.__name__.rsplit(".", 1)[0] + ".bridge")
    src, tgt = generated_pair(br, frames=4)
    body = bpy.data.objects["Heavy_body"]
    for g in list(body.vertex_groups):        # the left hand and its fingers lose their skin weights
        if g.name == "left_hand" or g.name.startswith(("left_thumb", "left_index", "left_middle", "left_ring",
                                                        "left_little")):
            body.vertex_groups.remove(g)
    with pytest.raises(pipe.CoreError, match=r"^Character 'Heavy': no mesh vertex is skinned to its left hand"):
        pipe.read_inputs(src, tgt, method="reconform")
    # copy-rotations places no key vertices: the same target is fine for it (the source is read then)
    with pytest.raises(pytest.fail.Exception, match="the source clip was read first"):
        pipe.read_inputs(src, tgt, method="copy_rotations")
