"""The ReConForM solver (ReConForM §4.2): Adam over the target's joint rotations and root position, all frames
at once, on key-vertex descriptors of source and target.

- ``losses``: the terms of Eq. 1 as pure functions, one each;
- ``settings``: the options a user sets (``SolverSettings``, presets) and what a step reports (``Progress``);
  every other choice is a named constant in the module that uses it;
- ``parametrisation``: the variables (6D rotation residuals and a hips offset, B-splines in time);
- ``objective``: the terms (regularisation, jerk, L_sem with adaptive weights, floor barrier), balanced;
- ``footing``: the foot model (contact and lock);
- ``terrain_start``: on a terrain (ReConForM §6.2), the solve's start put onto it (footings, hips, leg IK);
- ``optim``: Adam and its learning-rate schedule;
- ``lifecycle``: what a solve driven step by step shares (cancel between steps, done);
- ``job``: one solve as a generator (``SolveJob``);
- ``partners``: the terms between characters solved together (pairs of two characters, gaze);
- ``group``: a joint solve of several pairs as one generator (``GroupSolveJob``, ReConForM §6.1);
- ``barrier``, ``bulges``, ``capsules``, ``free_pairs``: a body kept out of itself and out of a partner's;
- ``head``: the head's attitude kept near copy-rotations';
- ``knots``, ``graphed``, ``continued``: B-spline grids in time, the compiled/graphed dense step, a re-solve that
  continues a finished set-up;
- ``conflicts``: conflicting terms detected from their gradients, and resolved (ReConForM §6.3, Eq. 3).
"""

from ..keyverts.template import keyvert_order
from .footing import CONTACT_MAX, CONTACT_MIN, LOCK_MAX, LOCK_MIN, sole_points
from .group import GroupSolveJob
from .job import SolveJob
from .knots import bspline_basis
from .settings import (CONTINUE, PART_WEIGHT_TERMS, PARTNER_TERM, RESOLVE, SEMANTIC_TERMS, TERMS, Progress,
                       SolverSettings, WarmSchedule)

__all__ = ["GroupSolveJob", "SolveJob", "SolverSettings", "WarmSchedule", "RESOLVE", "CONTINUE", "Progress",
           "PART_WEIGHT_TERMS", "PARTNER_TERM", "SEMANTIC_TERMS", "TERMS", "bspline_basis", "keyvert_order",
           "sole_points", "CONTACT_MIN", "CONTACT_MAX", "LOCK_MIN", "LOCK_MAX"]
