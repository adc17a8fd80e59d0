"""One solve, as a generator (ReConForM §4.2: Adam over the target's rotations and root position, all frames at
once): set-up, one Adam step per ``next()``, cancel between steps, result.

    job = SolveJob(source, source_motion, target, init_motion, SolverSettings.preset("balanced"))
    for progress in job.steps():      # Progress(fraction, step, total, loss, terms, relative)
        ...                           # job.cancel() from another thread stops it between steps
    motion = job.result()             # core.Motion of the target

``core.pipeline.retarget`` drives it (the source's ``ClipTrack`` shared with copy-rotations and the metrics);
docs/solver.md.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import CoreError
from ..contacts.feet import SOFT_LOW, foot_lows_and_velocity, foot_side
from ..contacts.ground import ground_levels
from ..rig.humanoid import CORE_BONES, FINGER_BONES, limb_of
from ..keyverts.template import keyvert_order
from ..progress import drive
from ..rig.chains import VariableChain, VertexChain
from ..rig.rotations import quat_to_matrix
from ..character.track import ClipTrack
from ..types import Character, Motion
from .barrier import own_barrier
from .capsules import own_capsules, source_body_points
from .reach import own_terms, surface_reach
from .surface import seen_pairs, surface_barrier, surface_gate
from . import footing, objective, parametrisation
from .footing import SOLE_FRAMES, FootModel, sole_points, target_soles
from .objective import Objective, start_objective
from .graphed import graphed_pose, pose_and_terms
from .head import HeadAttitude
from .lifecycle import StepLifecycle
from .optim import alpha_at, deterministic, learning_rates, solver_adam, torch_threads
from .parametrisation import Parametrisation, root_jacobian_inverse, upper_body_bones
from .root_start import floor_drift_lift, root_xy_from_feet
from .settings import CONTINUE, RESOLVE, Progress, SolverSettings, WarmSchedule
from .terrain_start import onto_terrain, terrain_lift
from .yielding import yield_stats, yielding_step, yields_at

SEED = 0    #: torch's random seed, set at each set-up: a solve is reproducible run to run
#: the root starts where the source's planted feet stay put (``root_start.root_xy_from_feet``; False: copy-rotations')
ROOT_FROM_FEET = True
#: the solve's floating-point type: "float32", or "float64" as a rounding check (tools/bench/bench_gpu.py;
#: docs/decisions.md "float32")
DTYPE = "float32"


def _check_motion(character: Character, motion: Motion, what: str):
    J = character.skeleton.num_bones
    if motion.rotations.shape[1] != J:
        raise CoreError(f"{what} has {motion.rotations.shape[1]} bone channels but armature "
                        f"'{character.name}' has {J} bones: read the motion from that armature.")
    if motion.num_frames < 1:
        raise CoreError(f"{what} has no frames: pick a frame range with at least one frame.")


class SolveJob(StepLifecycle):
    """One retargeting solve of ``source_motion`` from ``source`` onto ``target``.

    Args:
        source, target: Characters with skeleton, mesh, bone_map, keyverts (same template) and height.
        source_motion: the source clip (Motion of the source skeleton; never modified).
        init_motion: the copy-rotations result on the target (Motion of the target skeleton, same frames).
        settings: SolverSettings (default: the 'balanced' preset).
        warm_start: optional previous result (Motion of the target) to start from ('Re-solve'): α held at 1,
            ``warm_schedule`` (default ``settings.RESOLVE``): its share of ``settings.iterations`` at its share of
            the learning rates or, continuing ``warm_state`` (the ``optim`` of the solve that made it,
            ``Adam.continue_from``), ``continue_schedule``'s (default ``settings.CONTINUE``).
        warm_sixd: optional (T, Jo, 6) 6D vectors of the optimised bones as the solve that made ``warm_start``
            had them (``result_sixd``; NaN on frames it did not solve): its fit is then exact there.
        source_track: the source clip's ClipTrack when the caller already has one (``core.pipeline.retarget``).
        terrain: the ground under the target (z = f(x, y), ReConForM §6.2): a ``core.contacts.terrain.HeightField``
            or any differentiable callable f(x, y); None: the level z = 0.
    """

    def __init__(self, source: Character, source_motion: Motion, target: Character, init_motion: Motion,
                 settings: SolverSettings = None, warm_start: Motion = None, source_track: ClipTrack = None,
                 warm_sixd: np.ndarray = None, warm_state=None, warm_schedule: WarmSchedule = RESOLVE,
                 continue_schedule: WarmSchedule = CONTINUE, terrain=None):
        super().__init__()
        self.settings = settings or SolverSettings.preset("balanced")
        _check_motion(source, source_motion, f"Source motion of '{source.name}'")
        _check_motion(target, init_motion, f"Initial motion of '{target.name}'")
        if init_motion.num_frames != source_motion.num_frames:
            raise CoreError(f"Initial motion of '{target.name}' has {init_motion.num_frames} frames but the "
                            f"source clip has {source_motion.num_frames}: copy the rotations of the same range.")
        if warm_start is not None:
            _check_motion(target, warm_start, f"Previous result on '{target.name}'")
            if warm_start.num_frames != init_motion.num_frames:
                raise CoreError("The previous result covers another frame range: retarget from scratch.")
        for c in (source, target):
            if "hips" not in c.bone_map or c.bone_map["hips"] not in c.skeleton.names:
                raise CoreError(f"Armature '{c.name}': map its hips bone in the bone map before solving.")
            if c.keyverts is None or len(c.keyverts) == 0:
                raise CoreError(f"Character '{c.name}' has no key vertices: transfer them first.")
            if c.mesh is None:
                raise CoreError(f"Character '{c.name}' has no mesh: fit a body to it before solving.")
            if c.height is None or not np.isfinite(c.height) or c.height <= 0:
                raise CoreError(f"Character '{c.name}' has no height h_c: measure it before solving.")
        if source_track is not None and (source_track.character is not source
                                         or source_track.motion is not source_motion):
            raise CoreError("The source track given to the solver belongs to another character or clip.")
        self.keyvert_order = keyvert_order(source, target)
        self.source = source
        self.target = target
        self.source_motion = source_motion
        self.source_track = source_track
        self.init_motion = init_motion
        self.warm_start = warm_start
        self.warm_sixd = warm_sixd if warm_start is not None else None
        self.warm_state = warm_state if warm_start is not None else None
        self.warm_schedule = WarmSchedule(*warm_schedule)
        self.continue_schedule = WarmSchedule(*continue_schedule)
        self.terrain = terrain
        self.fps = float(source_motion.fps)
        self.total = self.settings.num_steps(warm_start is not None, self.continue_schedule
                                             if self.warm_state is not None else self.warm_schedule)
        self._pose = None   #: GraphedPose on a GPU (set-up), else None
        self._dense = None  #: (key-vertex positions, α, the dense terms there) from the last _forward with α
        self.history, self.stats = [], {}     # per step {term: weighted normalised value}; statistics
        self.yielded = []                     #: per yielding step, its count of frames that yielded (yielding.py)
        #: optional (bones (P,), (P, 3) positions in each bone's frame): points carried by the target's bones,
        #: evaluated with the key vertices (``solver.capsules``' capsule ends); world: ``body_positions``
        self.body_points = self.body_positions = self.body_init = self.own_barrier = self._own_caps = None
        self.surface = self.reach = None   #: hands kept out of the body (``surface.py``) and on its skin (``reach.py``)
        self.source_body = None

    # -- public API -------------------------------------------------------------------------------------

    @property
    def num_frames(self) -> int:
        return self.init_motion.num_frames

    def prepare(self):
        """Generator: the set-up, yielding a line for the user before each of its parts (on a 10 000-frame clip
        it takes seconds: the source's key-vertex paths, the soles, the objective, copy-rotations' start)."""
        if self._ready:
            return
        # the set-up's scatters too (the spline's fit to copy-rotations, the skinning weights): on a GPU they set
        # where the steps start, and the deterministic switch is what makes two runs equal there
        with torch_threads(self.settings.num_threads), deterministic(self.settings.device):
            t0 = time.perf_counter()
            yield from self._setup()
            self.stats["setup_s"] = time.perf_counter() - t0

    def steps(self):
        """Generator: sets up (first call, ``prepare``), then yields one Progress per Adam step; stops early on
        cancel."""
        for _ in self.prepare():
            if self._cancel.is_set():
                return
        with torch_threads(self.settings.num_threads):
            t0 = time.perf_counter()
            while self._step < self.total:
                if self._cancel.is_set():
                    return
                yield self._adam_step()
            self.finish(time.perf_counter() - t0)

    def setup(self):
        """Build everything the steps need (once; ``steps()`` calls it, a ``GroupSolveJob`` calls it for each of
        its members)."""
        drive(self.prepare())

    def finish(self, seconds: float, steps: int = None):
        """Mark the solve done after ``seconds`` of steps (``steps``: the count a group took for this member)."""
        if steps is not None:
            self._step = int(steps)
        self._done = True
        self.stats.update(solve_s=seconds, frames_per_s=self.num_frames / max(seconds, 1e-9))
        self.stats.update(yield_stats(self.yielded))

    def run(self) -> Motion:
        """Run every step synchronously and return the result."""
        drive(self.steps())
        return self.result()

    def result(self) -> Motion:
        """The retargeted target Motion (sign-continuous WXYZ basis rotations; hips location in basis space); bones
        that are not optimised keep the initial motion's channels exactly."""
        if self.cancelled and not self._done:
            raise CoreError("The solve was cancelled: nothing was produced.")
        if not self._done:
            raise CoreError("The solve has not finished: drive job.steps() to the end first.")
        return self.param.motion(self.init_motion, self.opt_idx, self.root_idx)

    def result_sixd(self) -> np.ndarray:
        """(T, Jo, 6) the optimised bones' 6D vectors of the result (a later warm start's ``warm_sixd``)."""
        if not self._done:
            raise CoreError("The solve has not finished: drive job.steps() to the end first.")
        return self.param.sixd_frames()

    @property
    def metrics(self) -> dict:
        """Statistics of the solve (timings, frames/s, active pair entries, reference scales, last terms); the
        result's quality metrics are ``core.metrics.scores.evaluate`` (a full-mesh pass, computed on demand)."""
        out = dict(self.stats)
        out["steps"] = self._step
        if self.history:
            out["final_terms"] = dict(self.history[-1])
        return out

    # -- set-up -----------------------------------------------------------------------------------------

    def _setup(self):
        """The set-up (``prepare``): a generator yielding a line before each slow part."""
        s = self.settings
        torch.manual_seed(SEED)
        dt, dev = {"float32": torch.float32, "float64": torch.float64}[DTYPE], torch.device(s.device)
        ground = self.terrain if self.terrain is not None else 0.0    # the height terms': the terrain, or z = 0
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise CoreError("CUDA was requested but torch sees no CUDA device: choose the CPU device.")
        self.dtype, self.device = dt, dev
        src, tgt = self.source, self.target
        T = self.num_frames
        track = self.source_track if self.source_track is not None else ClipTrack(src, self.source_motion)
        self.source_track = track
        self.h_src, self.h_tgt = float(src.height), float(tgt.height)
        self.root_idx = tgt.skeleton.index(tgt.bone_map["hips"])

        # target: key vertices (in the source's order) and sole points, evaluated together every step
        kv_ids = tgt.keyverts.vertex_ids[self.keyvert_order]
        self.limbs = tuple(tgt.keyverts.limbs[k] for k in self.keyvert_order)
        self.num_keyverts = len(kv_ids)
        yield "Choosing the target's soles"
        self.sole_ids, self.sole_side = target_soles(tgt, self.init_motion)
        self.stats["sole_points"] = int(len(self.sole_ids))
        self._own_caps = own_capsules(self)          # the self-contact barrier's (w_self_barrier > 0)
        self.surface = surface_barrier(self)         # and its surface part: points on the hands, fields
        self.reach = surface_reach(self)             # the source's hands that rest on its body, kept there
        self.chain = VertexChain(tgt, np.concatenate([kv_ids, self.sole_ids]), dt, dev, [self.root_idx],
                                 self.body_points)

        # source: key-vertex paths, floor, feet (from its track)
        yield "Reading the source's key vertices and feet"
        p64, n64 = track.keyverts
        src_p = torch.as_tensor(p64, dtype=dt, device=dev)
        src_n = torch.as_tensor(n64, dtype=dt, device=dev)
        #: float, or (T,) float64 per frame (source_ground="track" or a sequence)
        self.source_ground_level = ground_levels(track, s.source_ground)
        g = np.asarray(self.source_ground_level)
        self.stats.update(source_ground=float(g.mean()), source_ground_drift=float(g.max() - g.min()))
        src_ground = torch.as_tensor(g[:, None], dtype=dt, device=dev) if g.ndim else float(g)
        feet = None
        if ((s.foot_contact_weight > 0 or s.foot_lock > 0) and len(self.sole_ids)
                and set(self.sole_side.tolist()) == {0, 1}):
            _, s_side, s_local = sole_points(track, footing.SOLE_POINTS, SOLE_FRAMES)
            pts = [track.foot_points[k][:, s_local[s_side == k]] for k in (0, 1)]
            low, vel = foot_lows_and_velocity(pts, self.source_ground_level, self.fps, SOFT_LOW * self.h_src,
                                              track.foot_points)
            feet = FootModel(s, low, vel, self.sole_side, foot_side(tgt, kv_ids), self.h_src, self.h_tgt,
                             self.h_tgt / self.h_src, self.fps, dt, dev, ground)
        self.feet = feet
        self.stats.update(contact_frames=0 if feet is None or feet.contact_w is None else float(feet.contact_w.sum()),
                          locked_frames=0 if feet is None or feet.lock_w is None else float(feet.lock_w.sum()))
        yield "Finding the source's contacts"
        head = HeadAttitude.of(s, [tgt.keyverts.names[k] for k in self.keyvert_order])
        self.objective = Objective(s, src_p, src_n, src_ground, self.h_src, self.h_tgt, self.fps, self.limbs,
                                   feet, src.mesh.fitted, head=head, ground=ground,
                                   body_rows=None if self.surface is None else self.surface.rows.start,
                                   reg_lift=floor_drift_lift(track, g, tgt, self.init_motion, ground))
        if self.surface is not None and objective.CONTACT_HELD_ON_SURFACE:
            self.objective.surface_gate = surface_gate(self, kv_ids)
        if self.surface is not None and src.mesh.fitted and objective.FITTED_PEN_ON_MESH:
            self.objective.pen_seen = seen_pairs(self, kv_ids)

        # variables: the mapped core bones (and fingers on request) that move a key vertex, and the hips
        yield "Setting up the variables"
        names = tgt.skeleton.names
        canon = {names.index(b): c for c, b in tgt.bone_map.items() if b in names}
        wanted = set(CORE_BONES) | (set(FINGER_BONES) if parametrisation.OPTIMISE_FINGERS else set())
        # bones that move no key vertex cannot change the objective: they keep the initial motion
        opt = sorted(j for j, c in canon.items() if c in wanted and j in self.chain.position)
        opt = opt if self.root_idx in opt else sorted(opt + [self.root_idx])
        self.opt_idx, self.opt_upper = np.asarray(opt, dtype=np.int64), upper_body_bones(tgt.skeleton, opt, canon)
        self.opt_parts = [limb_of(canon[j]) if j in canon else "torso" for j in opt]
        self._build_variables(self.init_motion)
        with torch.no_grad():   # copy-rotations' key vertices: where its planted feet are
            p0, _, _ = self._forward(self.param.zero_residuals())
        root_xy = root_xy_from_feet(self.objective, p0, self.fps) if T >= 2 and ROOT_FROM_FEET else None
        if self.terrain is not None and T >= 2 and tgt.mesh is not None:   # a warm start gets the same start
            self._start_on_terrain(root_xy)
        if self.warm_start is not None:
            R = quat_to_matrix(torch.as_tensor(self.warm_start.rotations, dtype=torch.float64))[:, self.opt_idx]
            dloc = torch.as_tensor(self.warm_start.locations[:, self.root_idx]
                                   - self.init_motion.locations[:, self.root_idx])
            self.param.fit_to(R, dloc, self.warm_sixd)
        self.param.require_grad()

        yield "Measuring copy-rotations' objective"
        with torch.no_grad():  # through the same path as the solve, so zero residuals give exactly p_init
            self.p_init, self.n_init, self.sole_init = self._forward(self.param.zero_residuals())
        self.body_init = self.body_positions          # (T, P, 3) copy-rotations' body points, or None
        self.source_body = source_body_points(self)   # the jerk budget's cap on the body points, or None
        self._measure_start()
        if self.warm_start is None and root_xy is not None:
            self.param.set_root_xy(root_xy)
            self.stats["root_init_shift_max_m"] = float(root_xy.norm(dim=-1).max())
        self._last_entries = 0
        self.stats.update(source_pair_entries=self.objective.pairs.num_source_entries, frames=T,
                          pairs_allowed=self.objective.pairs_allowed)
        self._start_optimiser()
        self.own_barrier = own_barrier(self)      # body_positions: the start's (copy-rotations)
        self._pose = graphed_pose(self)
        self._ready = True

    def _measure_start(self):
        """The objective's reference scales at copy-rotations (``p_init``, ``n_init``, ``sole_init``) and
        copy-rotations' own objective at α = 0, ½ and 1 (``start_loss``): every term is a polynomial of degree ≤ 2
        in α (its weights are W_src + α W_tgt, squared inside the dist, height and sliding terms), so these three
        give it at any α, the yardstick of Progress.relative."""
        with torch.no_grad():
            raw = self.objective.set_initial(self.p_init, self.n_init, self.sole_init, self.body_init,
                                             self.source_body)
            zero = torch.zeros((self.num_frames, 3), dtype=self.dtype, device=self.device)

            def at(alpha):
                return self.objective.raw_terms(self.p_init, self.n_init, alpha,
                                                self.objective.pairs.active(self.p_init, alpha), self.sole_init, zero,
                                                body=self.body_init)
            self.start_loss = tuple(float(sum(self.objective.weighted(r).values()))
                                    for r in (raw, at(0.5), at(1.0)))
        self.stats.update(scales=dict(self.objective.scales), initial_raw={k: float(v) for k, v in raw.items()})

    def _start_optimiser(self):
        """Adam on the variables (continuing ``warm_state``'s where it fits), the step count and base rates."""
        s = self.settings
        self.optim = solver_adam(self.param.params, self.param.rates(s.lr_rot, s.lr_root))
        # near an optimum already: a fresh Adam takes smaller steps; one continuing the last solve's takes its own
        cont = self.stats["continued_state"] = self.warm_state is not None and self.optim.continue_from(self.warm_state)
        schedule = self.continue_schedule if cont else self.warm_schedule
        self.total = s.num_steps(self.warm_start is not None, schedule)
        lr_scale = schedule.lr if self.warm_start is not None else 1.0
        self.base_lrs = self.param.rates(s.lr_rot * lr_scale, s.lr_root * lr_scale)  # root offset: units of h_tgt

    def _build_variables(self, motion: Motion):
        """The solver's variables on ``motion`` (the start): the optimised bones' 6D residuals and the hips
        offset (``Parametrisation``), and the chain that turns them into key vertices (``VariableChain``)."""
        chain, dt, dev = self.chain, self.dtype, self.device
        opt_pos = [chain.position[j] for j in self.opt_idx]
        R_init_n = quat_to_matrix(torch.as_tensor(motion.rotations[:, chain.needed], dtype=torch.float64))
        R_init_n = R_init_n.to(dt).to(dev)                                           # (T, Jn, 3, 3)
        L_init = torch.as_tensor(motion.locations, dtype=dt, device=dev)
        self.vars = VariableChain(chain, R_init_n, L_init[:, chain.needed_t], opt_pos, chain.position[self.root_idx])
        jac = torch.as_tensor(root_jacobian_inverse(self.target.skeleton, self.root_idx, motion, self.h_tgt))
        self.param = Parametrisation(R_init_n[:, opt_pos], chain.rest_rot[opt_pos], L_init[:, self.root_idx],
                                     jac.to(dt).to(dev), self.h_tgt, self.fps,
                                     parametrisation.KNOT_SPACING, () if self.feet is None else self.feet.events(),
                                     parametrisation.EVENT_KNOTS, self.opt_upper, parametrisation.UPPER_KNOTS)

    def _start_on_terrain(self, root_xy: torch.Tensor = None):
        """Start from copy-rotations put onto the terrain (``terrain_start``): the hips raised, each planted foot
        on a footing of its step, the legs bent to reach them. That motion becomes the solve's start and L_reg's
        anchor (copy-rotations walks at flat height: on stairs its planted feet would sink ever deeper, and
        L_reg would hold them there). The feet are their mesh vertices in copy-rotations, moved by ``root_xy``
        (T, 2), the horizontal root offset the solve starts with (the terrain is read there)."""
        feet = ClipTrack(self.target, self.init_motion).foot_points                  # [(T, F_k, 3)] * 2
        pts = np.concatenate(feet, 1)
        if root_xy is not None:
            pts[..., :2] += root_xy.detach().double().cpu().numpy()[:, None, :]
        side = np.concatenate([np.full(p.shape[1], k) for k, p in enumerate(feet)])
        contact = None if self.feet is None or self.feet.contact_w is None \
            else self.feet.contact_w.double().cpu().numpy()
        hips, rise, shift = terrain_lift(pts, side, contact, self.terrain, self.fps, self.h_tgt)
        self.init_motion = onto_terrain(self.target, self.init_motion, hips, rise, shift)
        self._build_variables(self.init_motion)
        self.stats["terrain_lift_range_m"] = [float(hips.min()), float(hips.max())]
        self.stats["terrain_footing_shift_max_m"] = float(np.linalg.norm(shift, axis=-1).max())

    # -- forward ----------------------------------------------------------------------------------------

    def frame_residuals(self):
        """Per-frame 6D residuals (T, Jo, 6) and root offsets (T, 3) from the control points."""
        return self.param.frame_residuals()

    def _forward(self, residuals=None, alpha: float = None):
        """(key-vertex positions (T, N, 3), normals (T, N, 3), sole points (T, S, 3) or None) at the current
        variables (or at per-frame ``residuals`` = (6D (T, Jo, 6), root offset (T, 3))); with ``alpha``, also the
        dense terms there (on a GPU from its graph), which ``terms_at`` then takes for these positions."""
        off, p, n, self.body_positions, dense = pose_and_terms(self, residuals, alpha)
        self._root_world = off * self.h_tgt                                   # (T, 3) world offset of the hips
        self.pose_outputs = (p, n)     #: key-vertex and sole positions, their normals (T, N + S, 3): the pairs read
        N = self.num_keyverts
        out = (p[:, :N], n[:, :N], p[:, N:]) if p.shape[1] > N else (p, n, None)
        self._dense = None if dense is None else (out[0], alpha, dense)
        return out

    def _alpha(self) -> float:
        return 1.0 if self.warm_start is not None else alpha_at(self._step, self.total)

    def weighted_terms(self, alpha: float = None, pairset=None, residuals=None) -> dict:
        """{term: weight · raw / scale} at the current variables (differentiable w.r.t. them, or w.r.t.
        ``residuals`` = (per-frame 6D (T, Jo, 6), root offset (T, 3)) when given)."""
        alpha = self._alpha() if alpha is None else alpha
        p, n, sole = self._forward(residuals, alpha)
        return self.terms_at(p, n, sole, alpha, pairset)

    def terms_at(self, p, n, sole, alpha: float, pairset=None) -> dict:
        """{term: weight · raw / scale} at key-vertex positions p (T, N, 3), normals n and sole points ``sole``
        from ``_forward`` (its hips offset included); ``pairset``: the active pair set (computed when None)."""
        if pairset is None:
            pairset = self.objective.pairs.active(p, alpha)
            self._last_entries = len(pairset)
        last = self._dense               # the graph's dense terms, when they are at these positions and α
        dense = last[2] if last is not None and last[0] is p and last[1] == alpha else None
        out = self.objective.weighted(self.objective.raw_terms(p, n, alpha, pairset, sole, self._root_world, dense,
                                                               self.body_positions))
        own_terms(self, out)          # a limb inside its own body: in 'pen'; a hand off the skin it rests on: 'dist'
        return out

    def _adam_step(self) -> Progress:
        s = self.settings
        step = self._step
        self.optim.lrs = learning_rates(self.base_lrs, step, self.total, s.warmup)
        with deterministic(self.device):
            for p in self.param.params:
                p.grad = None
            if yields_at(self, step):     # the contact state yields to the self barrier (yielding.py)
                terms, loss = yielding_step(self)
            else:
                terms = self.weighted_terms()
                loss = sum(terms.values())
                # gradients per control point are O(1 / controls): rescaled, ADAM_EPS means the same at any length
                (loss * self.param.num_controls).backward()
            self.optim.step()
        *vals, total = torch.stack([v.detach() for v in terms.values()] + [loss.detach()]).tolist()  # one GPU sync
        vals = dict(zip(terms, vals))
        self.history.append(vals)
        self.stats["pair_entries_last"] = self._last_entries
        relative = self.relative(total)      # at this step's α, before the step count moves
        self._step += 1
        return Progress(self._step / self.total, step, self.total, total, vals, relative)

    def relative(self, loss: float, alpha: float = None) -> float:
        """``loss`` (at α, default the current step's) over copy-rotations' loss at the same α: 1 where the
        solve starts, lower is better (docs/solver.md "Reading the progress")."""
        alpha = self._alpha() if alpha is None else alpha
        start = start_objective(self.start_loss, alpha)
        return loss / start if start > 1e-12 else float("nan")
