"""Parametric skinned humanoid on the canonical skeleton (pure numpy), and bodies fitted to skeletons.

The body is an implicit surface: a smooth union of ellipsoids (torso, head), tapered capsules (limbs), rounded
boxes (palms) and flattened capsules (finger mittens, feet) placed on the canonical bones, meshed with surface
nets (one quad per sign-changing grid edge) and projected onto the exact implicit surface. The result is one
closed, smooth, watertight quad mesh (~6-9k vertices at the default resolution) with smooth skin weights
(exponential falloff of the distance to each bone's primitives, restricted to skeletal neighbours so that the
left thigh never follows the right one).

Frame of the generated character: armature space = world space (``object_matrix`` is the identity), metres,
Z up, the character faces -Y (Blender's front view), its left is +X, the soles rest on z = 0.

Used for the key-vertex template (neutral parameters, T-pose), for demo characters (``BodyParams``), and to
give skeleton-only motion sources a body (``fit_body_to_skeleton``).

The generator: ``layout`` (``BodyParams``, joint layout, primitives), ``shapes`` (signed-distance primitives),
``mesher`` (surface nets, vertex normals), ``generate`` (``make_body``). Apart from it, ``fit`` fits the key-vertex
template (ReConForM §3.1) to a skeleton (``fit_body_to_skeleton``, ``stretch_limbs``).
"""

from .fit import fit_body_to_skeleton, stretch_limbs
from .generate import body_model, canonical_skeleton, make_body
from .layout import SHORT_HEAVY, TALL_THIN, BodyParams
from .mesher import vertex_normals

__all__ = ["SHORT_HEAVY", "TALL_THIN", "BodyParams", "body_model", "canonical_skeleton", "fit_body_to_skeleton",
           "make_body", "stretch_limbs", "vertex_normals"]
