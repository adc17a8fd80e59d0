"""A complete character, built once: bone map, body (its own mesh, or a template fitted to a skeleton-only
source), height h_c and key vertices (the ones stored on the character, hand-placed ones included, else
transferred by optimal transport, ReConForM §3.1).

The bridge reads what a scene holds into a ``CharacterSpec`` (plain arrays, on Blender's main thread);
``build_character`` completes it in any thread (the transfer takes a second or two), so the panel, the batch
command, the demo and the bench all build characters the same way (``core.pipeline.retarget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..body import fit_body_to_skeleton
from ..bonemap import apply_bone_map, detect_bone_map, validate_bone_map
from .frame import check_bone_map, reference_basis
from ..errors import CoreError
from ..contacts.ground import planted_soles
from ..keyverts import character_height, check_skinned_limbs, transfer_keyverts
from .meshparts import choose_body, remap_keyverts, submesh
from ..rig.rehang import rehang
from ..rig.tpose import lying_rest_message, rest_is_standing
from .track import ClipTrack
from ..types import Character, KeyVertexSet, Motion, Skeleton, SkinnedMesh

KEYVERT_COUNTS = (41, 96)


@dataclass(frozen=True)
class CharacterSpec:
    """One character as the scene holds it, before the core completes it.

    Attributes:
        skeleton: its Skeleton.
        mesh: its SkinnedMesh (every deforming mesh merged), or None for a skeleton-only character.
        bone_map: {canonical: bone name}, or None to detect it from names and topology.
        stored_keyverts: key vertices stored on the character (``locked`` where placed by hand), or None.
        clip: the clip it plays in this retarget, when it is the source (a skeleton-only source whose rest pose
            lies down stands its fitted body up from the clip's frame with both feet flat; a fitted body's soles
            are moved onto z = 0 where the clip plants them: ``core.contacts.ground.planted_soles``).
        mesh_choice: {mesh object name: True to use it as the body, False to leave it out}; meshes not named are
            read automatically (``core.character.meshparts``: clothing, eyes and props are left out).
    """

    skeleton: Skeleton
    mesh: SkinnedMesh = None
    bone_map: dict = None
    stored_keyverts: KeyVertexSet = None
    clip: Motion = None
    mesh_choice: dict = None

    @property
    def name(self) -> str:
        return self.skeleton.name


@dataclass(frozen=True)
class BuiltCharacter:
    """``build_character``'s result: the Character and how it was completed.

    Attributes:
        character: the complete Character (frozen).
        rig_type: detected rig family ('mixamo', 'rigify', ...) or 'given' for a given bone map.
        fitted_body: True when the body is the template fitted to a skeleton-only character.
        keyverts_origin: 'stored' (used as stored), 'transferred', 'transferred, N locked kept', or '' (none).
        notes: lines for the user (missing bones, fitted body, meshes left out, ...).
        meshes_left_out: {mesh object name: why} of the meshes the armature moves that are not its body.
    """

    character: Character
    rig_type: str = "given"
    fitted_body: bool = False
    keyverts_origin: str = ""
    notes: tuple = field(default_factory=tuple)
    meshes_left_out: dict = field(default_factory=dict)

    @property
    def transferred(self) -> bool:
        """True when the key vertices were (re)placed by this build, so the caller may store them."""
        return self.keyverts_origin.startswith("transferred")


def resolve_bone_map(skeleton: Skeleton, bone_map) -> tuple:
    """(bone map, rig type, notes): ``bone_map`` checked and fitted to ``skeleton`` (namespaces and case ignored,
    absent bones dropped), or detected when None. Raises CoreError when nothing maps."""
    notes = []
    if bone_map is None:
        res = detect_bone_map(skeleton)
        if not res.bone_map:
            raise CoreError(f"Nothing mapped on '{skeleton.name}': no bone was recognised as part of a humanoid; "
                            "give a bone map (set-up file or Bone Map panel).")
        if res.missing_required:
            notes.append(f"'{skeleton.name}' ({res.rig_type}): required bones not found: "
                         f"{', '.join(res.missing_required)}.")
        return dict(res.bone_map), res.rig_type, notes
    validate_bone_map(bone_map, what=f"Bone map for '{skeleton.name}'")
    fitted = dict(apply_bone_map(skeleton, dict(bone_map)).bone_map)
    if not fitted:
        raise CoreError(f"Nothing mapped on '{skeleton.name}': none of the bone map's bones exist in it; "
                        "fix the bone map or let it be detected.")
    return fitted, "given", notes


def usable_keyverts(stored: KeyVertexSet, mesh: SkinnedMesh, n: int) -> bool:
    """True when stored key vertices can be used as they are: ``n`` of them, every id inside ``mesh``."""
    if stored is None or mesh is None or len(stored) != n:
        return False
    ids = stored.vertex_ids
    return not len(ids) or (ids.min() >= 0 and ids.max() < mesh.num_verts)


def check_character(spec: CharacterSpec, *, keyvert_count: int = 41, need_mesh: bool = False,
                    reuse_stored: bool = True, need_standing: bool = False, role: str = None) -> tuple:
    """The cheap half of ``build_character`` (milliseconds): raise the CoreError that completing ``spec`` (and,
    with ``role`` 'Source'|'Target', copy-rotations) would raise, before any slow work. A retarget checks both
    characters first, so an error about the target never waits for the source's key-vertex transfer.

    Checks: the bone map (given and fitted, or detected), a rest pose lying down (with ``need_standing``:
    ``core.rig.tpose.lying_rest_message``), the bones copy-rotations needs (with ``role``), a mesh when ``need_mesh``,
    the key-vertex count, and a skinned vertex on every limb the transfer places key vertices on. Returns
    ``resolve_bone_map``'s (bone map, rig type, notes).
    """
    if keyvert_count and keyvert_count not in KEYVERT_COUNTS:
        raise CoreError(f"Key-vertex count must be 41 or 96, got {keyvert_count}.")
    bone_map, rig_type, notes = resolve_bone_map(spec.skeleton, spec.bone_map)
    lying = lying_rest_message(spec.skeleton, bone_map) if need_standing else None
    if lying:
        raise CoreError(lying)
    character = Character(spec.skeleton, spec.mesh, bone_map)
    if role is not None:
        check_bone_map(character, role)
    if spec.mesh is None and need_mesh:
        raise CoreError(f"Armature '{spec.name}' deforms no mesh: add an Armature modifier pointing to it on the "
                        "character's mesh; the 'reconform' method needs the target's body.")
    if spec.mesh is not None and keyvert_count and not (
            reuse_stored and usable_keyverts(spec.stored_keyverts, spec.mesh, keyvert_count)):
        check_skinned_limbs(character, keyvert_count, spec.stored_keyverts)
    return bone_map, rig_type, notes


def build_character(spec: CharacterSpec, *, keyvert_count: int = 41, fit_body: bool = False,
                    need_mesh: bool = False, reuse_stored: bool = True, need_standing: bool = False) -> BuiltCharacter:
    """Complete a character once.

    Args:
        spec: what the scene holds.
        keyvert_count: key vertices wanted (41 or 96); 0 for none (copy-rotations needs none).
        fit_body: give a skeleton-only character the template fitted to its skeleton (a source).
        need_mesh: raise when the character deforms no mesh (a target solved by ReConForM).
        reuse_stored: use stored key vertices as they are when there are ``keyvert_count`` of them inside the
            mesh (False: transfer anyway, the Transfer button).
        need_standing: raise, before any slow work, when its rest pose lies down (a target:
            ``core.rig.tpose.lying_rest_message``).
    Returns:
        BuiltCharacter. Key vertices not used as stored are transferred, keeping every stored one marked
        ``locked`` (hand-placed).
    """
    name = spec.name
    bone_map, rig_type, notes = check_character(spec, keyvert_count=keyvert_count, need_mesh=need_mesh,
                                                reuse_stored=reuse_stored, need_standing=need_standing)
    notes = list(notes)
    skeleton, mesh, clip, fitted = spec.skeleton, spec.mesh, spec.clip, False
    stored, left_out = spec.stored_keyverts, {}
    if mesh is not None and (len(mesh.part_names) > 1 or spec.mesh_choice):   # the body, not a sword or a shirt
        body = choose_body(skeleton, mesh, bone_map, spec.mesh_choice)
        if body.left_out:
            mesh, new_index = submesh(mesh, body.used)
            stored, left_out = remap_keyverts(stored, new_index), dict(body.left_out)
            notes.append(body.note(name))
    rig = rehang(skeleton, bone_map)         # limb ends parented elsewhere (IK feet): solved on a re-hung copy
    if rig is not None:
        skeleton, mesh = rig.skeleton, rig.mesh(mesh)
        clip = rig.to_core(clip) if clip is not None else None
        notes.append(rig.describe())
    if mesh is None and fit_body:
        base = None
        if clip is not None and not rest_is_standing(skeleton, bone_map):
            base = reference_basis(Character(skeleton, None, bone_map), clip)
        mesh, fitted = fit_body_to_skeleton(skeleton, bone_map, base=base), True
        if clip is not None:    # soles onto the clip's floor where it plants them, not the template's depth
            body = Character(skeleton, mesh, bone_map)
            lift = planted_soles(ClipTrack(replace(body, height=float(character_height(body))), clip))
            if lift:
                mesh = fit_body_to_skeleton(skeleton, bone_map, base=base, sole_lift=lift)
        notes.append(f"'{name}' deforms no mesh: fitted a template body to its skeleton.")
    character = Character(skeleton, mesh, bone_map, rig=rig)
    origin = ""
    if mesh is not None:
        character = replace(character, height=float(character_height(character)))
    if mesh is not None and keyvert_count:
        if reuse_stored and not fitted and usable_keyverts(stored, mesh, keyvert_count):
            kv, origin = stored, "stored"
        else:
            locked = stored if stored is not None and not fitted else None
            kv = transfer_keyverts(character, n=keyvert_count, locked=locked)
            kept = int(np.sum(kv.locked))
            origin = "transferred" + (f", {kept} locked kept" if kept else "")
        character = replace(character, keyverts=kv)
    return BuiltCharacter(character, rig_type, fitted, origin, tuple(notes), left_out)
