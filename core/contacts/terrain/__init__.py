"""The target's ground (ReConForM §6.2, non-flat ground): a differentiable height field ``z = f(x, y)``.

Blender is Z up. The target stands on world z = 0 unless a terrain is given; the method replaces every height
``z`` by ``z − f(x, y)`` in M_height (hence W_floor and L_height) and in the foot terms. ``HeightField`` is a
regular grid interpolated bilinearly (differentiable in x and y); ``ground_height`` evaluates any ground the
core accepts: a level, one level per frame, or a height field.

A ground *object* reaches the core as a ``GroundSurface`` (its evaluated triangles in world space, read by the
bridge); ``sample_ground`` turns it into a HeightField over the region a clip's feet can reach
(``clip_footprint``): vertical lines through a regular grid of points are intersected with every triangle
(``vertical_hits``, exact: what rays cast straight down return), the top surface is kept (below an optional
ceiling), cells with no surface are holes (filled from their neighbours and reported), cells with free space
under the top surface are overhangs (reported), and samples beside a steep edge are raised so that the
bilinear field lies on or above the mesh at steep edges (a step's edge is smeared over the lower tread's side,
never into the step).
docs/solver.md "Terrain" has the measurements behind the defaults.
"""

from .field import HeightField, ground_height
from .sampling import (DEFAULT_SPACING, MAX_SAMPLES, GroundSurface, TerrainReport, check_covers, clip_footprint,
                       sample_ground, vertical_hits)

__all__ = ["DEFAULT_SPACING", "MAX_SAMPLES", "GroundSurface", "HeightField", "TerrainReport", "check_covers",
           "clip_footprint", "ground_height", "sample_ground", "vertical_hits"]
