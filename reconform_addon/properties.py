"""Scene-level settings of the ReConForM panel: ``scene.reconform`` (a ``ReconformSettings``).

Everything the N-panel shows lives here: the two characters, the clip and frame range, one bone map per
character role, the key-vertex template size, solver quality and advanced weights, progress and status of a
running retarget, the metrics of the last solve and the conflicts it found. Key vertices themselves live on
the mesh objects (``Object.reconform_keyverts``, items ``RECONFORM_PG_keyvert``; read and written by
``bridge.keyverts``), so they travel with the character.

Nothing here imports torch; ``solver_settings()`` imports ``core.solver`` when called.
"""


import dataclasses
import json

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, FloatVectorProperty,
                       IntProperty, PointerProperty, StringProperty)
from bpy.types import PropertyGroup

from .advanced_fields import ADVANCED_BOOLS, ADVANCED_FLOATS, ADVANCED_INTS, ADVANCED_NAMES
from .bridge.terrain import GROUND_TYPES

ROLES = ('source', 'target')

QUALITY_ITEMS = (
    ('FAST', "Fast", "Few iterations: a quick preview of the result"),
    ('BALANCED', "Balanced", "Default iterations and weights"),
    ('BEST', "Best", "More iterations: slower, lowest residuals"),
)
METHOD_ITEMS = (
    ('RECONFORM', "ReConForM", "Optimise the copied rotations so contacts, floor and distances are kept"),
    ('COPY_ROTATIONS', "Copy Rotations", "Copy world-space bone rotations only (fast baseline, no PyTorch)"),
)
DEVICE_ITEMS = (
    ('DEFAULT', "Default", "The device chosen in the add-on's preferences (CPU unless changed)"),
    ('CPU', "CPU", "Solve on the CPU"),
    ('CUDA', "CUDA", "Solve on the first NVIDIA GPU (needs a CUDA build of PyTorch)"),
)
#: where the source's floor is (core.contacts.ground; docs/solver.md "Ground"): item -> SolverSettings.source_ground
SOURCE_GROUND_ITEMS = (
    ('AUTO', "Automatic", "The source's own floor: z = 0 where the clip stands on it, else a level per frame "
     "tracked from its lowest foot contacts (a clip that floats, sinks or drifts)"),
    ('ZERO', "World Floor", "The source clip stands on z = 0"),
    ('ESTIMATE', "Estimate Level", "One floor level for the whole clip, from the source's lowest foot contacts "
     "(a clip that floats above or sinks into z = 0)"),
    ('TRACK', "Track Drift", "A floor level per frame that follows the source's lowest foot contacts over a few "
     "seconds (a clip whose floor drifts up or down, as inertial or video capture often does)"),
    ('CUSTOM', "Custom Level", "The floor level given below"),
)
SOURCE_GROUND_MODES = {'AUTO': "auto", 'ZERO': "zero", 'ESTIMATE': "estimate", 'TRACK': "track"}
#: what the target walks on (ReConForM §6.2; docs/solver.md "Terrain")
GROUND_ITEMS = (
    ('WORLD', "World Floor", "The target stands on z = 0"),
    ('OBJECT', "Object", "The target walks on a mesh object (stairs, a ramp, rough ground): its surface as the "
     "viewport shows it, modifiers included, sampled under the clip's footprint"),
)
KEYVERT_COUNT_ITEMS = (
    ('41', "41", "Default template: sparse full-body coverage"),
    ('96', "96", "Extended template: denser around hands, feet and torso"),
)
ROLE_ITEMS = (
    ('SOURCE', "Source", "The character whose motion is retargeted"),
    ('TARGET', "Target", "The character receiving the motion"),
)


def _is_armature(self, obj):
    return obj.type == 'ARMATURE'


def _is_ground(self, obj):
    return obj.type in GROUND_TYPES


def _tag_redraw(self=None, context=None):
    wm = bpy.context.window_manager
    for win in wm.windows:
        for area in win.screen.areas:
            if area.type == 'VIEW_3D':
                area.tag_redraw()


class RECONFORM_PG_keyvert(PropertyGroup):
    """One key vertex of a character (``name`` is the template name, e.g. 'left_palm'); ``bridge.keyverts``
    converts a mesh object's collection of them to and from a ``core.KeyVertexSet``."""

    index: IntProperty(name="Vertex", description="Vertex index in the mesh object", default=-1, min=-1)
    limb: StringProperty(name="Limb", description="Body limb of the key vertex (torso, left_hand, ...)")
    locked: BoolProperty(name="Locked", description="Placed by hand: a new transfer keeps it", default=False)
    co: FloatVectorProperty(name="Rest Position", description="Cached rest-pose position (object space)", size=3,
                            subtype='XYZ')
    mesh: StringProperty(name="Mesh", description="Mesh object of the vertex when it is not the holder "
                                                  "(several meshes on one armature)")


class RECONFORM_PG_mesh_use(PropertyGroup):
    """The user's choice for one mesh an armature moves (``bridge.bodyparts``): part of the body or not."""

    object: PointerProperty(name="Mesh", type=bpy.types.Object)
    use: EnumProperty(name="Use", default='AUTO', items=(
        ('AUTO', "Auto", "Clothing, eyes and props are left out automatically, everything else is the body"),
        ('BODY', "Body", "Part of the character's body: key vertices, height, feet and metrics use it"),
        ('LEAVE_OUT', "Leave Out", "Not the body (a prop, clothing): the retarget ignores it"),
    ))


class ReconformBoneMapItem(PropertyGroup):
    """One row of a bone map: a canonical humanoid bone and the character's bone playing it."""

    canonical: StringProperty(name="Canonical", description="Canonical humanoid bone (core.rig.humanoid)")
    bone: StringProperty(name="Bone", description="This character's bone for the canonical bone ('' = unmapped)")
    required: BoolProperty(name="Required", description="Retargeting needs this bone")


class ReconformConflict(PropertyGroup):
    """Two semantic terms whose gradients disagree on one body part over the clip (ReConForM §6.3); after a joint
    retarget, "partner" names the terms between the characters."""

    character: StringProperty(name="Character", description="The target whose body part this is, after a joint "
                                                            "retarget of partners ('' for a single pair)")
    body_part: StringProperty(name="Body Part")
    term_a: StringProperty(name="Term A")
    term_b: StringProperty(name="Term B")
    cosine: FloatProperty(name="Cosine", description="Cosine between the two terms' gradients (-1: opposed)",
                          min=-1.0, max=1.0)
    severity: FloatProperty(name="Severity", description="How strongly they conflict (0 none, 1 opposed)",
                            min=0.0, max=1.0, subtype='FACTOR')
    frames: StringProperty(name="Frames", description="Frame spans where the two terms conflict on this part")
    first_frame: IntProperty(name="First Frame", description="First frame where they conflict")
    score: FloatProperty(name="Cost", description="Severity × duration (seconds): how much of the clip the "
                                                  "conflict costs; the list is sorted by it", min=0.0)
    balance: FloatProperty(
        name="Balance", default=0.5, min=0.0, max=1.0, subtype='FACTOR',
        description="Trade one term against the other on this body part at the next Re-solve: 0 keeps only "
                    "the first term, 1 only the second, 0.5 leaves both as they are")


class ReconformMetric(PropertyGroup):
    """One number of the last solve's metrics (``core.metrics.scores.evaluate``)."""

    value: FloatProperty(name="Value")
    reference: FloatProperty(name="Copy Rotations", description="Same metric for the copy-rotations start")
    has_reference: BoolProperty()


class ReconformPartnerPair(PropertyGroup):
    """One more source→target pair retargeted together with the panel's Source and Target (ReConForM §6.1): the
    sources play in one world frame (a couple captured together), every target gets its own new Action."""

    source: PointerProperty(name="Source", type=bpy.types.Object, poll=_is_armature,
                            description="Armature playing this partner's motion, in the same world as the main "
                                        "source")
    target: PointerProperty(name="Target", type=bpy.types.Object, poll=_is_armature,
                            description="Armature receiving this partner's motion")
    action: PointerProperty(name="Action", type=bpy.types.Action,
                            description="This source's clip; empty = whatever is playing on it")


class ReconformSettings(PropertyGroup):
    # --- characters and clip -------------------------------------------------------------------------------
    source: PointerProperty(name="Source", type=bpy.types.Object, poll=_is_armature,
                            description="Armature whose animation is retargeted (its meshes are found "
                                        "automatically; a skeleton-only source gets a fitted body)")
    target: PointerProperty(name="Target", type=bpy.types.Object, poll=_is_armature,
                            description="Armature receiving the motion (its meshes are found automatically)")
    action: PointerProperty(name="Action", type=bpy.types.Action,
                            description="Source clip; empty = whatever is playing on the source")
    use_scene_range: BoolProperty(name="Scene Range", default=False,
                                  description="Use the scene's frame range instead of the clip's")
    use_custom_range: BoolProperty(name="Custom Range", default=False,
                                   description="Retarget only the frames below (default: the whole clip)")
    frame_start: IntProperty(name="Start", default=1, description="First source frame to retarget")
    frame_end: IntProperty(name="End", default=250, description="Last source frame to retarget")
    method: EnumProperty(name="Method", items=METHOD_ITEMS, default='RECONFORM')
    push_to_nla: BoolProperty(name="Push to NLA", default=False,
                              description="Push the new Action onto a new NLA track of the target")

    # --- partners: more pairs retargeted together with source -> target (ReConForM §6.1) --------------------
    use_partners: BoolProperty(name="Retarget Partners Together", default=False,
                               description="Solve the pairs below together with Source -> Target: contacts between "
                                           "the characters and where they look are kept (one new Action per target)")
    partners: CollectionProperty(type=ReconformPartnerPair)
    partners_index: IntProperty()

    # --- bone maps -----------------------------------------------------------------------------------------
    source_bone_map: CollectionProperty(type=ReconformBoneMapItem)
    source_bone_map_index: IntProperty()
    source_bone_map_owner: StringProperty(description="Armature the source bone map was made for")
    source_rig_type: StringProperty(name="Rig Type")
    target_bone_map: CollectionProperty(type=ReconformBoneMapItem)
    target_bone_map_index: IntProperty()
    target_bone_map_owner: StringProperty(description="Armature the target bone map was made for")
    target_rig_type: StringProperty(name="Rig Type")
    bone_map_role: EnumProperty(name="Character", items=ROLE_ITEMS, default='SOURCE',
                                description="Whose bone map the list shows")
    mesh_role: EnumProperty(name="Character", items=ROLE_ITEMS, default='TARGET',
                            description="Whose meshes the list shows")

    # --- key vertices --------------------------------------------------------------------------------------
    keyvert_count: EnumProperty(name="Template", items=KEYVERT_COUNT_ITEMS, default='41',
                                description="Number of key vertices per character")
    keyvert_role: EnumProperty(name="Edit", items=ROLE_ITEMS, default='TARGET', update=_tag_redraw,
                               description="Whose key vertices the viewport shows and edits")
    show_keyverts: BoolProperty(name="Show Key Vertices", default=False, update=_tag_redraw,
                                description="Show the key vertices as draggable spheres in the viewport")
    keyvert_size: FloatProperty(name="Sphere Size", default=1.0, min=0.1, max=5.0, update=_tag_redraw)
    keyvert_active: IntProperty(name="Active Key Vertex", default=-1, update=_tag_redraw,
                                description="Key vertex highlighted in the viewport (the last one clicked)")
    keyvert_active_object: StringProperty(description="Mesh object of the active key vertex")

    # --- solver --------------------------------------------------------------------------------------------
    quality: EnumProperty(name="Quality", items=QUALITY_ITEMS, default='BALANCED',
                          update=lambda self, ctx: self.apply_preset())
    use_advanced: BoolProperty(name="Override Weights", default=False,
                               description="Use the advanced values below instead of the preset's")
    device: EnumProperty(name="Device", items=DEVICE_ITEMS, default='DEFAULT')
    source_ground: EnumProperty(name="Source Floor", items=SOURCE_GROUND_ITEMS, default='AUTO',
                                description="Where the source clip's floor is (the target stands on the Ground "
                                            "below)")
    source_ground_level: FloatProperty(name="Floor Level", default=0.0, unit='LENGTH', soft_min=-1.0, soft_max=1.0,
                                       description="World height of the source clip's floor (Custom Level)")
    ground: EnumProperty(name="Ground", items=GROUND_ITEMS, default='WORLD',
                         description="What the target walks on")
    ground_object: PointerProperty(name="Ground Object", type=bpy.types.Object, poll=_is_ground,
                                   description="The mesh the target walks on: stairs, a ramp, a terrain (only "
                                               "the region under the clip is sampled)")
    warm_start_fraction: FloatProperty(
        name="Re-solve Iterations", default=0.05, min=0.01, max=1.0, subtype='FACTOR',
        description="Share of the first solve's iterations a Re-solve runs, continuing the last solve from its "
                    "result")

    live_window: IntProperty(
        name="Live Window", default=75, min=8, soft_max=300, max=2000,
        description="Frames solved around the current frame while Live is on (75 = three seconds at 25 fps)")

    # --- run state (written by the operators only) ---------------------------------------------------------
    is_running: BoolProperty(options={'SKIP_SAVE'})
    progress: FloatProperty(name="Progress", min=0.0, max=1.0, subtype='FACTOR', options={'SKIP_SAVE'})
    status: StringProperty(name="Status")
    last_action: PointerProperty(type=bpy.types.Action, name="Result",
                                 description="Action written by the last retarget")
    last_method: StringProperty()
    metrics: CollectionProperty(type=ReconformMetric)
    metrics_json: StringProperty(description="Full metrics dict of the last solve, as JSON")
    last_ground: StringProperty(name="Ground", description="What the last retarget's target stood on")
    conflicts: CollectionProperty(type=ReconformConflict)
    conflicts_index: IntProperty()
    show_all_conflicts: BoolProperty(name="Show All", default=False,
                                     description="List every conflict, not only the costliest few")

    # ------------------------------------------------------------------------------------------------------
    def character(self, role: str):
        """The armature of ``role`` ('source'|'target', any case)."""
        return self.source if role.lower() == 'source' else self.target

    def bone_map_items(self, role: str):
        return self.source_bone_map if role.lower() == 'source' else self.target_bone_map

    def bone_map(self, role: str) -> dict:
        """{canonical: bone} of ``role``, mapped rows only; {} when the stored map was made for another armature."""
        arm = self.character(role)
        owner = getattr(self, f"{role.lower()}_bone_map_owner")
        if arm is None or owner != arm.name:
            return {}
        return {it.canonical: it.bone for it in self.bone_map_items(role) if it.bone}

    def set_bone_map(self, role: str, bone_map: dict, rig_type: str = "", owner: str = ""):
        """Fill ``role``'s list with every canonical bone, mapped or not."""
        from ..core.rig import humanoid

        items = self.bone_map_items(role)
        items.clear()
        names = list(humanoid.CANONICAL_BONES) + [c for c in bone_map if c not in humanoid.CANONICAL_BONES]
        for canonical in names:
            it = items.add()
            it.canonical = canonical
            it.bone = bone_map.get(canonical, "") or ""
            it.required = canonical in humanoid.REQUIRED_BONES
        setattr(self, f"{role.lower()}_rig_type", rig_type)
        setattr(self, f"{role.lower()}_bone_map_owner", owner)
        setattr(self, f"{role.lower()}_bone_map_index", 0)

    def frame_range(self):
        """(start, end) to read, or (None, None) for the whole clip."""
        if self.use_scene_range:
            sc = self.id_data
            return sc.frame_start, sc.frame_end
        if self.use_custom_range:
            return self.frame_start, self.frame_end
        return None, None

    def effective_device(self) -> str:
        """'CPU' or 'CUDA': this scene's choice, or the preferences' default device for 'DEFAULT'."""
        if self.device != 'DEFAULT':
            return self.device
        from . import preferences

        prefs = preferences.get()
        return prefs.default_device if prefs is not None else 'CPU'

    def apply_preset(self):
        """Copy the quality preset's values into the advanced fields (no-op when core.solver can't import)."""
        try:
            base = preset_settings(self.quality)
        except Exception:  # noqa: BLE001 - torch missing: the panel says so elsewhere
            return
        for name in ADVANCED_NAMES:
            if hasattr(base, name):
                setattr(self, name, getattr(base, name))

    def solver_settings(self, overrides: dict | None = None):
        """A ``core.solver.SolverSettings`` for this panel: preset, advanced values if enabled, device, source
        floor, overrides."""
        base = preset_settings(self.quality)
        fields = {f.name for f in dataclasses.fields(base)}
        changes = {}
        if self.use_advanced:
            for name in ADVANCED_NAMES:
                if name in fields:
                    changes[name] = getattr(self, name)
        if "device" in fields:
            changes["device"] = self.effective_device().lower()
        if "source_ground" in fields:
            changes["source_ground"] = (float(self.source_ground_level) if self.source_ground == 'CUSTOM'
                                        else SOURCE_GROUND_MODES[self.source_ground])
        for k, v in (overrides or {}).items():
            if k in fields:
                changes[k] = v
        return dataclasses.replace(base, **changes)

    def set_metrics(self, metrics: dict, reference: dict | None = None):
        """Store ``core.metrics.scores.evaluate`` output (flattened to scalars) for the panel."""
        self.metrics.clear()
        flat = flatten_metrics(metrics)
        ref = flatten_metrics(reference or {})
        for name, value in flat.items():
            if name.startswith(HIDDEN_METRIC_PREFIXES):  # solver statistics: kept in metrics_json only
                continue
            it = self.metrics.add()
            it.name = name
            it.value = value
            if name in ref:
                it.reference = ref[name]
                it.has_reference = True
        def _js(d):
            return {k: (None if v != v else v) for k, v in d.items()}

        self.metrics_json = json.dumps({"metrics": _js(flat), "reference": _js(ref)}, sort_keys=True)


# Add the advanced solver fields as annotations (one place lists them: ADVANCED_FLOATS / _INTS / _BOOLS).
for _name, _label, _desc, _default, _min, _max in ADVANCED_FLOATS:
    ReconformSettings.__annotations__[_name] = FloatProperty(
        name=_label, description=_desc, default=_default, min=_min, soft_max=min(_max, 100.0), max=_max,
        precision=4 if _name.startswith("lr") else 3)
for _name, _label, _desc, _default, _min, _max in ADVANCED_INTS:
    ReconformSettings.__annotations__[_name] = IntProperty(name=_label, description=_desc, default=_default,
                                                           min=_min, max=_max)
for _name, _label, _desc, _default in ADVANCED_BOOLS:
    ReconformSettings.__annotations__[_name] = BoolProperty(name=_label, description=_desc, default=_default)


def preset_settings(quality: str):
    """``core.solver.SolverSettings`` of a quality preset ('FAST'|'BALANCED'|'BEST'); imports torch."""
    from ..core.solver import SolverSettings

    return SolverSettings.preset(quality.lower())


#: Metric keys not listed in the panel (they stay in ``metrics_json``).
HIDDEN_METRIC_PREFIXES = ("solver_",)


def flatten_metrics(metrics, prefix: str = "") -> dict:
    """{'floor_penetration.mean': 0.01, ...}: nested dicts flattened with dots; scalars only, NaN kept
    (a metric undefined for this clip, e.g. contact F1 without contacts), infinities dropped."""
    out = {}
    for k, v in (metrics or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_metrics(v, key + "."))
        else:
            try:
                f = float(v)
            except (TypeError, ValueError):
                continue
            if abs(f) != float("inf"):  # NaN kept: "not defined for this clip" (shown as n/a)
                out[key] = f
    return out


classes = (RECONFORM_PG_keyvert, RECONFORM_PG_mesh_use, ReconformBoneMapItem, ReconformConflict, ReconformMetric,
           ReconformPartnerPair, ReconformSettings)


def register():
    bpy.types.Object.reconform_keyverts = CollectionProperty(type=RECONFORM_PG_keyvert)
    bpy.types.Object.reconform_meshes = CollectionProperty(type=RECONFORM_PG_mesh_use)
    bpy.types.Object.reconform_left_out = StringProperty(
        description="Meshes of this armature the last retarget left out of the body, and why (JSON)")
    bpy.types.Scene.reconform = PointerProperty(type=ReconformSettings)


def unregister():
    del bpy.types.Scene.reconform
    del bpy.types.Object.reconform_left_out
    del bpy.types.Object.reconform_meshes
    del bpy.types.Object.reconform_keyverts
