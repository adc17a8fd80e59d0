"""Both characters are checked before any slow work (issue 15 item 10): ``core.character.complete.check_character`` raises,
in milliseconds, the error that completing a character (bone map, copy-rotations' bones, a mesh, a skinned
vertex on every limb that gets key vertices) would raise after seconds, and ``core.pipeline.retarget.Retarget`` runs it
on the target before the source's key-vertex transfer starts."""

from dataclasses import replace

import numpy as np
import pytest

import core.character.complete as character_mod
from core.character.complete import CharacterSpec, build_character, check_character
from core.errors import CoreError
from core.rig.humanoid import LIMBS
from core.keyverts import load_template
from core.rig.parts import limb_labels
from core.pipeline.retarget import Retarget, RetargetOptions, run
from tests.core.synth import make_humanoid, walk_motion


@pytest.fixture(scope="module")
def pair():
    src, tgt = make_humanoid(), make_humanoid(scale=0.8, girth=2.0, leg=0.8, name="fat")
    return src, walk_motion(src, frames=6), tgt


def _spec(c, clip=None, **kw):
    return replace(CharacterSpec(c.skeleton, c.mesh, dict(c.bone_map), None, clip), **kw)


def _unskin(c, limb):
    """``c``'s mesh with the vertices of ``limb`` left without any skin weight."""
    lab = limb_labels(c.skeleton, c.mesh, c.bone_map)
    w = c.mesh.weight_values.copy()
    w[lab == LIMBS.index(limb)] = 0.0
    return replace(c.mesh, weight_values=w)


@pytest.fixture
def no_transfer(monkeypatch):
    """Fail the test if a key-vertex transfer (the seconds of work) starts."""
    calls = []
    monkeypatch.setattr(character_mod, "transfer_keyverts", lambda *a, **k: calls.append(a) or pytest.fail(
        "a key-vertex transfer started before the error"))
    return calls


@pytest.mark.parametrize("broken, message", [
    (dict(mesh="unskin"), "Character 'fat': no mesh vertex is skinned to its left hand (check the bone map and the "
                          "skin weights)."),
    (dict(bone_map="no_feet"), "Target armature 'fat': bone map lacks left_foot, right_foot; map them"),
    (dict(bone_map="nothing"), "Nothing mapped on 'fat': none of the bone map's bones exist in it"),
    (dict(mesh=None), "Armature 'fat' deforms no mesh: add an Armature modifier"),
])
def test_target_errors_come_before_the_source_transfer(pair, no_transfer, broken, message):
    src, clip, tgt = pair
    kw = {}
    if broken.get("mesh", 0) is None:
        kw["mesh"] = None
    elif broken.get("mesh") == "unskin":
        kw["mesh"] = _unskin(tgt, "left_hand")
    if broken.get("bone_map") == "no_feet":
        kw["bone_map"] = {k: v for k, v in tgt.bone_map.items() if k not in ("left_foot", "right_foot")}
    elif broken.get("bone_map") == "nothing":
        kw["bone_map"] = {"hips": "no_such_bone"}
    job = Retarget(_spec(src, clip), clip, _spec(tgt, **kw), RetargetOptions(method="reconform"))
    with pytest.raises(CoreError) as e:
        run(job)
    assert str(e.value).startswith(message), str(e.value)
    assert no_transfer == []


def test_check_is_what_the_build_raises_and_cheap(pair):
    _, _, tgt = pair
    spec = _spec(tgt, mesh=_unskin(tgt, "right_foot"))
    with pytest.raises(CoreError, match="no mesh vertex is skinned to its right foot") as checked:
        check_character(spec, keyvert_count=41)
    with pytest.raises(CoreError) as built:
        build_character(spec, keyvert_count=41)
    assert str(built.value) == str(checked.value)
    # key vertices stored and usable: nothing is transferred, so an unskinned limb is no error
    kv = load_template(41).keyverts
    stored = type(kv)(kv.names, kv.limbs, np.arange(41), np.ones(41, bool), kv.eye)
    assert check_character(replace(spec, stored_keyverts=stored), keyvert_count=41)[0] == tgt.bone_map
    # copy-rotations places no key vertices: the limb is not checked
    bone_map, rig_type, notes = check_character(spec, keyvert_count=0, role="Target")
    assert bone_map == tgt.bone_map and rig_type == "given" and notes == []
