"""Characters linked from a second .blend and library overrides of them (issue 15 item 1; Blender's rules in
reconform_addon/bridge/library.py): a linked target, or a non-editable (system) override, is refused before any
work, naming the object and what to do, and nothing changes; an editable override receives the new Action,
which is still assigned and plays after the file is saved and reopened; key vertices are never written on a
linked or overridden mesh (a note says so), and the Transfer button refuses such a character up front. A
failure while storing key vertices puts everything back (write_outcome is all or nothing)."""

import importlib

import numpy as np
import pytest

from tests.addon.generated import generated_pair
from tests.addon.ui_helpers import scene_fingerprint

bpy = pytest.importorskip("bpy")


@pytest.fixture(scope="module")
def mods(addon):
    return (importlib.import_module(addon.__name__ + ".reconform_addon.bridge"),
            importlib.import_module(addon.__name__ + ".reconform_addon.pipeline"))


@pytest.fixture(scope="module")
def shots(mods, tmp_path_factory):
    """lib.blend holds the generated Walker and Heavy, each in its own collection; three shot files use them:
    'linked' links both, 'override' appends Walker and overrides Heavy with the armature made editable,
    'system' is the same with the whole override hierarchy left non-editable (system overrides)."""
    br, _ = mods
    d = tmp_path_factory.mktemp("library")
    bpy.ops.wm.read_homefile(use_empty=True)
    generated_pair(br)
    kv = importlib.import_module(br.__name__ + ".keyverts")   # key vertices set up in the character's own file
    tpl = importlib.import_module(br.__name__.rsplit(".", 2)[0] + ".core.keyverts").load_template(41).keyverts
    kv.store_keyverts(bpy.data.objects["Walker_body"], type(tpl)(tpl.names, tpl.limbs, np.arange(41) * 7,
                                                                 np.zeros(41, bool), tpl.eye))
    for name in ("Walker", "Heavy"):
        coll = bpy.data.collections.new(name + "Coll")
        bpy.context.scene.collection.children.link(coll)
        for ob in (bpy.data.objects[name], bpy.data.objects[name + "_body"]):
            for c in list(ob.users_collection):
                c.objects.unlink(ob)
            coll.objects.link(ob)
    lib = d / "lib.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(lib))
    paths = {}
    for kind in ("linked", "override", "system"):
        bpy.ops.wm.read_homefile(use_empty=True)
        with bpy.data.libraries.load(str(lib), link=kind == "linked") as (_, dst):
            dst.collections = ["WalkerColl"]
        bpy.context.scene.collection.children.link(dst.collections[0])
        with bpy.data.libraries.load(str(lib), link=True) as (_, dst):
            dst.collections = ["HeavyColl"]
        coll = dst.collections[0]
        bpy.context.scene.collection.children.link(coll)
        if kind != "linked":
            coll.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=False)
            bpy.context.scene.collection.children.unlink(coll)
            heavy = _local("Heavy")
            assert heavy.override_library.is_system_override
            if kind == "override":
                heavy.override_library.is_system_override = False
        paths[kind] = d / f"shot_{kind}.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(paths[kind]))
    bpy.ops.wm.read_homefile(use_empty=True)
    return paths


def _local(name):
    """The object ``name`` of this file (an override), else the linked one."""
    obs = [o for o in bpy.data.objects if o.name == name]
    return next((o for o in obs if o.library is None), obs[0])


def _open(path):
    bpy.ops.wm.open_mainfile(filepath=str(path))
    return _local("Walker"), _local("Heavy")


def test_linked_target_is_refused_before_any_work(mods, shots, monkeypatch):
    br, pipe = mods
    src, tgt = _open(shots["linked"])
    assert tgt.library is not None and src.library is not None
    before = scene_fingerprint(bpy)
    monkeypatch.setattr(pipe, "read_motion", lambda *a, **k: pytest.fail("the source was read"))
    for method in ("copy_rotations", "reconform"):
        with pytest.raises(br.BridgeError) as e:
            pipe.retarget(src, tgt, method=method)
        assert str(e.value) == ("Armature 'Heavy' is linked from '//lib.blend' and cannot keep a new Action: make a "
                                "library override of it (Object > Library Override > Make) and retarget onto the "
                                "override.")
    assert scene_fingerprint(bpy) == before


def test_key_vertices_stored_in_the_library_are_read_through_the_link(mods, shots):
    br, pipe = mods
    src, _ = _open(shots["linked"])
    spec = pipe.read_character(src)
    assert src.library is not None and spec.stored_keyverts is not None
    np.testing.assert_array_equal(spec.stored_keyverts.vertex_ids, np.arange(41) * 7)


def test_panel_on_a_linked_target_changes_nothing(mods, shots):
    src, tgt = _open(shots["linked"])
    s = bpy.context.scene.reconform
    s.source, s.target, s.method = src, tgt, 'COPY_ROTATIONS'
    before = scene_fingerprint(bpy)
    with pytest.raises(RuntimeError, match=r"Armature 'Heavy' is linked from '//lib.blend' and cannot keep a new "
                                           r"Action: make a library override"):
        bpy.ops.reconform.retarget()
    assert scene_fingerprint(bpy) == before and s.last_action is None


def test_system_override_target_is_refused(mods, shots):
    br, pipe = mods
    src, tgt = _open(shots["system"])
    assert tgt.override_library is not None and tgt.override_library.is_system_override
    before = scene_fingerprint(bpy)
    with pytest.raises(br.BridgeError, match=r"^Armature 'Heavy' is a non-editable library override and cannot keep "
                                             r"a new Action: make it editable \(Outliner, Library Overrides view\)"):
        pipe.retarget(src, tgt)
    assert scene_fingerprint(bpy) == before


def _pose(arm, frames):
    """(F, J, 4, 4) Blender's evaluated pose matrices of ``arm`` on ``frames``."""
    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        out.append(np.array([np.array(pb.matrix) for pb in arm.pose.bones]))
    return np.array(out)


@pytest.mark.slow
def test_editable_override_keeps_the_action_after_save_and_reopen(mods, shots, tmp_path):
    br, pipe = mods
    src, tgt = _open(shots["override"])
    assert tgt.override_library is not None and not tgt.override_library.is_system_override
    body = _local("Heavy_body")
    assert body.override_library is not None
    res = pipe.retarget(src, tgt, method="reconform", settings={"quality": "fast", "iterations": 3})
    name = res.action.name
    assert name == "Walk to Heavy" and tgt.animation_data.action == res.action
    # the source's key vertices are stored on its local mesh; the override mesh cannot hold them: a note
    assert len(bpy.data.objects["Walker_body"].reconform_keyverts) == 41 and len(body.reconform_keyverts) == 0
    assert ("Key vertices of 'Heavy' not stored (mesh 'Heavy_body' is a library override): the next run "
            "transfers them again; place them in the character's own file to keep them.") in res.report["notes"]
    played = _pose(tgt, (1, 4, 8))
    out = tmp_path / "shot_saved.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out))
    bpy.ops.wm.read_homefile(use_empty=True)
    _, tgt = _open(out)
    ad = tgt.animation_data
    assert tgt.override_library is not None and ad.action is not None and ad.action.name == name
    assert ad.action_slot is not None and ad.action_slot.identifier == "OBHeavy"
    np.testing.assert_allclose(_pose(tgt, (1, 4, 8)), played, atol=1e-5)
    assert np.ptp(played[:, :, :3, 3], axis=0).max() > 0.01      # it moves


def test_transfer_button_refuses_a_linked_character(mods, shots):
    src, tgt = _open(shots["linked"])
    s = bpy.context.scene.reconform
    s.source, s.target = src, tgt
    before = scene_fingerprint(bpy)
    with pytest.raises(RuntimeError, match=r"Cannot store key vertices on 'Heavy': mesh 'Heavy_body' is linked from "
                                           r"'//lib.blend'\. Key vertices are kept on local meshes only"):
        bpy.ops.reconform.transfer_keyverts(role='TARGET')
    assert scene_fingerprint(bpy) == before


@pytest.mark.slow
def test_failed_key_vertex_store_puts_everything_back(mods, monkeypatch, clean_scene):
    """write_outcome: the Action, the bones' rotation modes and the key vertices stored before are restored
    when storing fails half-way (the source's stored, then the target's fails)."""
    br, pipe = mods
    src, tgt = generated_pair(br, frames=4)
    res = pipe.retarget(src, tgt, method="reconform", settings={"quality": "fast", "iterations": 2})
    kv = importlib.import_module(br.__name__ + ".keyverts")
    for ob in (bpy.data.objects["Walker_body"], bpy.data.objects["Heavy_body"]):   # stored by the first run
        assert len(ob.reconform_keyverts) == 41
        ob.reconform_keyverts[0].locked = True
    bpy.data.objects["Walker_body"].reconform_keyverts[3].index = 7
    tgt.animation_data.action = None
    for pb in tgt.pose.bones:
        pb.rotation_mode = 'XYZ'
    before = scene_fingerprint(bpy)
    outcome = res.outcome
    calls = []
    real_store = kv.store

    def store(arm, character, kvs):
        calls.append(arm.name)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real_store(arm, character, kvs)

    monkeypatch.setattr(kv, "store", store)
    monkeypatch.setattr(type(outcome), "keyverts_to_store",
                        lambda self: {r: b.character.keyverts for r, b in self.built.items()})
    with pytest.raises(RuntimeError, match="disk full"):
        pipe.write_outcome(tgt, outcome, "Again", source_obj=src)
    assert calls == ["Walker", "Heavy"]
    assert scene_fingerprint(bpy) == before and "Again" not in bpy.data.actions
