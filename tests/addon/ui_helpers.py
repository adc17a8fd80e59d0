"""Helpers for the UI tests: the add-on's modules in their bl_ext namespace, a recording stand-in for
``UILayout`` that checks every property, operator and icon a panel asks for, and small fake solver jobs."""

import importlib
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def ui(addon, name):
    """``reconform_addon.<name>`` of the enabled extension."""
    return importlib.import_module(f"{addon.__name__}.reconform_addon.{name}")


def core(addon, name):
    return importlib.import_module(f"{addon.__name__}.core.{name}")


def generated_pair(addon, frames: int, **walk):
    """An empty scene with two generated characters (``core.body``, low resolution): 'Walker' (a neutral body at
    x = 0) playing a procedural walk of ``frames`` frames ('Walk', ``tests.core.synth.walk_motion(**walk)``)
    and 'Heavy' (the short heavy body at x = 1.2)."""
    import dataclasses

    import bpy

    from core.body import SHORT_HEAVY, BodyParams, make_body
    from core.types import Character
    from tests.core.synth import walk_motion
    from tools.make_demo_scene import build_character

    bpy.ops.wm.read_homefile(use_empty=True)
    bridge = importlib.import_module(addon.__name__ + ".reconform_addon.bridge")
    for name, params, x in (("Walker", BodyParams(name="walker", resolution=0.03), 0.0),
                            ("Heavy", dataclasses.replace(SHORT_HEAVY, resolution=0.03), 1.2)):
        sk, mesh, bone_map = make_body(params, pose="T")
        arm = build_character(name, sk, mesh, x)
        if name == "Walker":
            motion = walk_motion(Character(sk, mesh, bone_map), frames=frames, **walk)
            bridge.write_motion(arm, bridge.read_skeleton(arm), motion, "Walk")


def saved_generated_pair(addon, frames: int, folder) -> "pathlib.Path":
    """``generated_pair`` of ``frames`` frames saved as ``folder``/generated.blend (a module fixture's file)."""
    import bpy

    generated_pair(addon, frames)
    path = pathlib.Path(folder) / "generated.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def run_enabled_in_fresh_process(tmp_path, prelude: str, body: str, timeout: float = 120.0):
    """Run ``body`` in a fresh process (Python with the bpy wheel, or a background Blender): ``prelude`` first (e.g. make torch unimportable), then
    the add-on is enabled from this checkout as ``bl_ext.nt.reconform`` (``pkg`` names its ``reconform_addon``;
    ``sys``, ``bpy``, ``addon_utils``, ``draw_panel`` and ``Stub`` are in scope), then ``body``, then it is
    disabled. Asserts the script got to its end."""
    script = "\n".join([textwrap.dedent(prelude), textwrap.dedent(f"""
        import sys
        import bpy, addon_utils
        sys.path.insert(0, {str(ROOT)!r})
        from tests.addon.ui_helpers import Stub, draw_panel
        from tools.extension import disable_addon, enable_addon
        _mod, _repo = enable_addon("nt")
        pkg = "bl_ext.nt.reconform.reconform_addon"
    """), textwrap.dedent(body), textwrap.dedent("""
        disable_addon("nt", _repo)
        print("FRESH-PROCESS-DONE")
    """)])
    import bpy

    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    if bpy.app.binary_path:  # inside a Blender binary (pytest-blender): a background Blender runs the script
        cmd = [bpy.app.binary_path, "-b", "--factory-startup", "--python-exit-code", "1", "--python-expr", script]
    else:                    # the bpy wheel: a plain Python imports bpy
        cmd = [sys.executable, "-c", script]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    assert "FRESH-PROCESS-DONE" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def _icons():
    import bpy

    return set(bpy.types.UILayout.bl_rna.functions["label"].parameters["icon"].enum_items.keys())


class FakeOperatorProps:
    """What ``layout.operator()`` returns: accepts only the operator's real properties."""

    def __init__(self, idname):
        import bpy

        mod, name = idname.split(".")
        op = getattr(getattr(bpy.ops, mod), name)
        self.__dict__["_props"] = set(op.get_rna_type().properties.keys())
        self.__dict__["_idname"] = idname
        self.__dict__["values"] = {}

    def __setattr__(self, key, value):
        assert key in self._props, f"operator {self._idname} has no property '{key}'"
        self.values[key] = value


class FakeLayout:
    """Records what a ``draw()`` asks for and fails on unknown properties, operators and icons."""

    _ICONS = None

    def __init__(self, root=None):
        self.root = root or self
        if root is None:
            self.calls = []
        self.enabled = True
        self.active = True
        self.alert = False
        self.use_property_split = False
        self.use_property_decorate = True
        self.scale_x = self.scale_y = 1.0
        self.alignment = 'EXPAND'

    # containers
    def _child(self, *a, **k):
        return FakeLayout(self.root)

    row = column = box = split = grid_flow = column_flow = _child

    def _icon(self, icon):
        if FakeLayout._ICONS is None:
            FakeLayout._ICONS = _icons()
        assert icon in FakeLayout._ICONS, f"unknown icon {icon!r}"

    def _record(self, kind, **kw):
        self.root.calls.append((kind, kw))

    def label(self, *, text="", icon='NONE', **kw):
        self._icon(icon)
        self._record("label", text=text, icon=icon)

    def separator(self, **kw):
        self._record("separator")

    def prop(self, data, prop, *, text=None, icon='NONE', **kw):
        self._icon(icon)
        assert prop in data.bl_rna.properties, f"{data!r} has no property '{prop}'"
        self._record("prop", data=data, prop=prop, text=text)

    def prop_search(self, data, prop, search_data, search_prop, *, text=None, icon='NONE', **kw):
        assert prop in data.bl_rna.properties, f"{data!r} has no property '{prop}'"
        assert search_prop in search_data.bl_rna.properties, f"{search_data!r} has no '{search_prop}'"
        self._record("prop_search", data=data, prop=prop)

    def operator(self, idname, *, text=None, icon='NONE', **kw):
        self._icon(icon)
        props = FakeOperatorProps(idname)
        self._record("operator", idname=idname, text=text, props=props)
        return props

    def template_list(self, listtype, list_id, dataptr, propname, active_dataptr, active_propname, **kw):
        import bpy

        assert hasattr(bpy.types, listtype) or any(c.bl_idname == listtype for c in bpy.types.UIList.__subclasses__())
        assert propname in dataptr.bl_rna.properties
        assert active_propname in active_dataptr.bl_rna.properties
        self._record("template_list", listtype=listtype, propname=propname)

    def progress(self, *, factor=0.0, type='BAR', text=""):
        assert 0.0 <= factor <= 1.0
        self._record("progress", factor=factor, text=text)

    # queries
    def texts(self):
        return [kw.get("text") or "" for k, kw in self.calls if k == "label"]

    def operators(self):
        return [kw["idname"] for k, kw in self.calls if k == "operator"]

    def props(self):
        return [kw["prop"] for k, kw in self.calls if k in ("prop", "prop_search")]


class Stub:
    """Stands in for a Panel/UIList instance: has ``layout`` (and any attribute set on it)."""

    def __init__(self, proxy=None, **kw):
        self.layout = FakeLayout()
        self.filter_name = ""
        self.bitflag_filter_item = 1 << 30
        self._proxy = proxy
        self.__dict__.update(kw)

    def __getattr__(self, name):  # delegate to a real struct (AddonPreferences.draw uses self as data)
        proxy = self.__dict__.get("_proxy")
        if proxy is None:
            raise AttributeError(name)
        return getattr(proxy, name)


def draw_panel(cls, context):
    """Run ``cls.poll`` and ``cls.draw`` (and ``draw_header``) on a FakeLayout; returns it (None when poll fails)."""
    if hasattr(cls, "poll") and not cls.poll(context):
        return None
    stub = Stub()
    if hasattr(cls, "draw_header"):
        cls.draw_header(stub, context)
    cls.draw(stub, context)
    return stub.layout


class FakeProgress:
    def __init__(self, fraction, step, total, loss):
        self.fraction, self.step, self.total, self.loss, self.terms = fraction, step, total, loss, {}


class FakeJob:
    """A SolveJob stand-in: ``steps`` yields ``total`` progresses (optionally blocking on ``gate``)."""

    def __init__(self, result, total=5, gate=None, fail_at=None):
        self._result, self.total, self.gate, self.fail_at = result, total, gate, fail_at
        self._cancel = threading.Event()
        self.stepped = 0

    def cancel(self):
        self._cancel.set()

    @property
    def cancelled(self):
        return self._cancel.is_set()

    def steps(self):
        for k in range(self.total):
            if self._cancel.is_set():
                return
            if self.gate is not None:
                self.gate.wait(5.0)
            if self.fail_at == k:
                raise RuntimeError("boom at step %d" % k)
            self.stepped += 1
            yield FakeProgress((k + 1) / self.total, k + 1, self.total, 1.0 / (k + 1))

    def result(self):
        if self._cancel.is_set():
            raise RuntimeError("cancelled")
        return self._result


def scene_fingerprint(bpy):
    """Everything a retarget could touch: Actions and their keys, each object's assignment, NLA tracks, bone
    rotation modes and stored key vertices."""
    acts = {}
    for a in bpy.data.actions:
        keys = []
        for layer in getattr(a, "layers", ()):
            for strip in layer.strips:
                for bag in strip.channelbags:
                    for fc in bag.fcurves:
                        co = np.empty(2 * len(fc.keyframe_points), np.float32)
                        fc.keyframe_points.foreach_get("co", co)
                        keys.append((fc.data_path, fc.array_index, co.tobytes()))
        acts[a.name] = sorted(keys)
    objs = {}
    for o in bpy.data.objects:
        ad = o.animation_data
        kv = getattr(o, "reconform_keyverts", None)
        objs[o.name] = (ad.action.name if ad and ad.action else None,
                        getattr(ad, "action_slot", None) and ad.action_slot.identifier,
                        len(ad.nla_tracks) if ad else 0,
                        tuple(pb.rotation_mode for pb in o.pose.bones) if o.pose else (),
                        tuple((it.name, it.index, it.locked, it.mesh) for it in kv) if kv is not None else ())
    return acts, objs


def quick_transfer(kvmod):
    """A fast stand-in for ``core.keyverts.transfer_keyverts`` for UI tests (the OT transfer itself is tested
    in tests/core): per limb, each template key vertex goes to the nearest vertex of the same limb after both
    limbs are normalised to zero mean and unit variance (the paper's normalisation, without the transport)."""
    from importlib import import_module

    types = import_module(kvmod.__name__.rsplit(".", 1)[0] + ".types")
    humanoid = import_module(kvmod.__name__.rsplit(".", 1)[0] + ".rig.humanoid")

    def transfer(character, n=41, locked=None, **kw):
        tpl = kvmod.load_template(n)
        kv = tpl.keyverts
        pos, _nrm, _ = kvmod.tpose_geometry(character)
        lab = kvmod.limb_labels(character.skeleton, character.mesh, character.bone_map)
        tlab = kvmod.limb_labels(tpl.skeleton, tpl.mesh, tpl.bone_map)
        ids = np.zeros(len(kv), np.int64)
        lock = np.zeros(len(kv), bool)
        for li, limb in enumerate(humanoid.LIMBS):
            ks = [k for k in range(len(kv)) if kv.limbs[k] == limb]
            if not ks:
                continue
            dm, tm = np.nonzero(lab == li)[0], np.nonzero(tlab == li)[0]
            if len(dm) == 0:
                dm = np.arange(len(pos))
            xd, xt = pos[dm], tpl.mesh.rest_verts[tm]
            xd = (xd - xd.mean(0)) / (xd.std(0) + 1e-9)
            tk = (tpl.mesh.rest_verts[kv.vertex_ids[ks]] - xt.mean(0)) / (xt.std(0) + 1e-9)
            d = ((tk[:, None, :] - xd[None, :, :]) ** 2).sum(-1)
            ids[ks] = dm[np.argmin(d, 1)]
        if locked is not None:
            for k, nm in enumerate(kv.names):
                if nm in locked.names:
                    i = locked.names.index(nm)
                    if locked.locked[i]:
                        ids[k], lock[k] = locked.vertex_ids[i], True
        return types.KeyVertexSet(kv.names, kv.limbs, ids, lock, kv.eye)

    return transfer
