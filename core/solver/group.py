"""A joint solve of several source→target pairs (ReConForM §6.1): the characters are optimised together, each
with every term of its own solve, joined by the terms between them (``partners.PartnerObjective``).

    members = [SolveJob(src_k, motion_k, tgt_k, init_k, settings) for k in range(K)]   # same frames and fps
    job = GroupSolveJob(members, settings)
    for progress in job.steps():          # Progress of the whole group; job.cancel() stops between steps
        ...
    motions = job.results()               # one core.Motion per target, in the members' order

Each member is set up as a single solve (its key vertices and sole points, foot model, adaptive weights,
variables: the rotations and the root position of its target). A step evaluates every member's terms at its
own variables, the partner terms at the stacked key vertices of all of them, adds everything and takes one
Adam step over all the variables: rotations and root positions of every target move together, so a tall lead
and a short follow reach for each other's hands (paper Fig. 7). With one member there is no partner term and
the step is exactly the single solve's (tests/core/test_group.py).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import CoreError
from .optim import alpha_at, deterministic, learning_rates, solver_adam, torch_threads
from .barrier import PartnerBarrier
from .capsules import capsule_ends, capsule_points
from .free_pairs import partner_contacts
from .lifecycle import StepLifecycle
from .partners import PartnerObjective
from .settings import Progress
from .yielding import job_part, leaves_of, yielding_backward, yields_at

#: share of its single-solve learning rates each member of a group of K ≥ 2 steps with (docs/solver.md
#: "Multi-character", "Step size"): a term between two characters is corrected by both of them at once, so at
#: the single solve's rates their relative position moves twice as far per step as one character's limbs
PARTNER_STEP = 0.75
#: limb chains of a member's bones (``SolveJob.opt_parts``): each moves only its own key vertices, so where no term
#: between the characters acts on them it steps at the single solve's rate (``member_rates``)
CHAINS = tuple((f"{side}_{a}", f"{side}_{b}") for side in ("left", "right") for a, b in (("leg", "foot"),
                                                                                          ("arm", "hand")))
#: share of its single-solve rate an arm (with its hand) steps at where a term between the characters acts on it.
#: PARTNER_STEP, as the rest of the body: at 1 the arms keep more of their own contacts while holding a partner, but
#: the searches of a K = 5 solve grow by a quarter and the feet and the demo couple's hold lose (docs/solver.md
#: "Step size")
ARM_STEP = PARTNER_STEP


def member_rates(member, step: float, shared) -> list:
    """A group member's learning rates in its ``param.params``' order (rotations, root offset, then the upper
    body's rotations where they have their own grid): floats, or per control point (C_g, Jo_g, 1) and (C, 1)
    tensors.

    ``step`` × the single-solve rates where a term between the characters acts, the single solve's elsewhere:
    ``shared`` (T, N) bool (``PartnerObjective.shared_vertices``: the member's key vertices such a term acts on,
    frame by frame). A leg's bones (with its foot) take ``step`` on the control points of the frames where one
    of that chain's key vertices is shared, an arm's (with its hand) ``ARM_STEP`` there; the other bones and the
    root (they move every key vertex above them) ``step`` where any of the member's is. ``shared`` None: ``step``
    everywhere."""
    rates = member.base_lrs
    if step == 1.0 or shared is None:
        return [r * step for r in rates]
    if not shared.any():                    # a character no term between them reaches: as if solved alone
        return list(rates)
    param = member.param

    def scale(band, frames, step=step):
        """(C_g,) ``step`` on the controls of ``band`` (a grid, ``parametrisation.Band``) that shape ``frames`` (T,)
        bool, 1 elsewhere."""
        return np.where(band.controls(frames), step, 1.0)
    limbs = np.asarray(member.limbs)
    parts = np.asarray(member.opt_parts)
    out, uniform = [], True
    for cols, band in param.groups:
        rot_scale = np.repeat(scale(band, shared.any(1))[:, None], len(cols), 1)      # (C_g, Jo_g)
        for chain in CHAINS:
            in_chain = np.flatnonzero(np.isin(parts[cols], chain))
            if len(in_chain):
                rot_scale[:, in_chain] = scale(band, shared[:, np.isin(limbs, chain)].any(1),
                                               ARM_STEP if chain[0].endswith("_arm") else step)[:, None]
        out.append(rot_scale)
        uniform = uniform and bool((rot_scale == step).all())
    anywhere = scale(param.groups[0][1], shared.any(1))
    if uniform and (anywhere == step).all():
        return [r * step for r in rates]
    as_t = lambda x: torch.as_tensor(x, dtype=member.dtype, device=member.device)      # noqa: E731
    rot, root = rates[0], rates[1]
    return [rot * as_t(out[0])[..., None], root * as_t(anywhere)[:, None]] + \
        [rot * as_t(x)[..., None] for x in out[1:]]


class GroupSolveJob(StepLifecycle):
    """One joint solve of K ≥ 1 ``SolveJob`` members (not started; their own ``steps()`` are never driven).

    Args:
        members: SolveJobs of the pairs, one per target, all over the same frames at the same fps, all first
            solves or all warm-started re-solves.
        settings: the group's SolverSettings for the schedule and the partner terms (default: the first
            member's).
    """

    def __init__(self, members, settings=None):
        super().__init__()
        members = list(members)
        if not members:
            raise CoreError("A joint solve needs at least one source→target pair.")
        m0 = members[0]
        self.settings = settings or m0.settings
        for m in members[1:]:
            if m.num_frames != m0.num_frames or abs(m.fps - m0.fps) > 1e-6:
                raise CoreError(f"'{m.source.name}' has {m.num_frames} frames at {m.fps:g} fps but "
                                f"'{m0.source.name}' has {m0.num_frames} at {m0.fps:g}: characters solved "
                                "together must play the same frame range at the same frame rate.")
            if m.total != m0.total or (m.warm_start is None) != (m0.warm_start is None):
                raise CoreError("The characters of a joint solve must share their solver schedule.")
        targets = [m.target for m in members]
        if len(set(map(id, targets))) != len(targets):
            raise CoreError("A target character appears twice in the joint solve: give each pair its own target.")
        self.members = members
        self.total = m0.total
        self.fps = m0.fps
        self.partners = None
        self.barrier = None
        self.optim = None
        self.history = []
        self.stats = {}
        self.notes = []      #: lines for the user (a character without face key vertices does not look)

    # -- public API -------------------------------------------------------------------------------------------

    def cancel(self):
        """Ask the solve, and each member's, to stop before its next step (thread-safe)."""
        super().cancel()
        for m in self.members:
            m.cancel()

    @property
    def num_frames(self) -> int:
        return self.members[0].num_frames

    def steps(self):
        """Generator: sets every member up (first call), then yields one Progress per Adam step of the group."""
        with torch_threads(self.settings.num_threads):
            if not self._ready:
                t0 = time.perf_counter()
                with deterministic(self.members[0].settings.device):       # as SolveJob.prepare
                    self._setup()
                self.stats["setup_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            while self._step < self.total:
                if self._cancel.is_set():
                    return
                yield self._adam_step()
            seconds = time.perf_counter() - t0
            for m in self.members:
                m.finish(seconds, self._step)
            self._done = True
            self.stats["solve_s"] = seconds
            self.stats["frames_per_s"] = self.num_frames / max(seconds, 1e-9)

    def run(self) -> list:
        """Run every step synchronously and return the results."""
        for _ in self.steps():
            pass
        return self.results()

    def results(self) -> list:
        """The retargeted Motion of every member's target, in the members' order."""
        if not self._done:
            raise CoreError("The joint solve was cancelled or has not finished: nothing was produced.")
        return [m.result() for m in self.members]

    @property
    def metrics(self) -> dict:
        """Statistics of the joint solve (timings, frames/s, partner and gaze entries, reference scales)."""
        out = dict(self.stats)
        out["steps"] = self._step
        if self.history:
            out["final_terms"] = dict(self.history[-1])
        return out

    # -- set-up and steps -------------------------------------------------------------------------------------

    def _setup(self):
        capsules = None
        if len(self.members) > 1 and self.settings.w_barrier > 0:
            capsules = []
            for m in self.members:      # the bodies' capsule ends, evaluated with the key vertices every step
                caps, m.body_points = capsule_points(m.target, bulges=True)   # the own barrier reads the bulges
                capsules.append(caps)
        for m in self.members:
            m.setup()
        if capsules is not None:
            self.barrier = PartnerBarrier(self.settings, self.members, capsules,
                                          contacts=partner_contacts(self.members, capsules))
        # the terms between the characters, unless both their weights are 0 (characters solved together only so
        # that the barrier keeps their bodies apart, or to compare with solving them alone): nothing to evaluate
        if len(self.members) > 1 and (self.settings.w_partner > 0 or self.settings.w_gaze > 0):
            self.partners = PartnerObjective(self.settings, self.members)
            with torch.no_grad():
                p = torch.cat([m.p_init for m in self.members], 1)
                n = torch.cat([m.n_init for m in self.members], 1)
                raw = self.partners.set_initial(p, n)
            pp = self.partners.pairs
            self.stats["partner_pairs"] = pp.num_pairs
            self.stats["partner_source_entries"] = pp.num_source_entries
            self.stats["partner_initial_raw"] = {k: v.tolist() for k, v in raw.items()}
            self.stats["partner_scales"] = {k: v.tolist() for k, v in self.partners.scales.items()}
            self.stats["gaze_source_entries"] = int((self.partners.look_src > 0).sum())
            self.notes.extend(self.partners.notes)
        self._start_optimiser()

    def _start_optimiser(self, continue_from=None):
        """Adam over every member's variables at their rates (``member_rates``), continuing ``continue_from``'s
        moment estimates and step count when given (a re-solve of the group)."""
        params, lrs = [], []
        step = 1.0 if len(self.members) == 1 else PARTNER_STEP
        shared = None if self.partners is None else self.partners.shared_vertices()     # (T, Ntot) bool
        share = []     # per member, the share of its rotation variables (controls × bones) at the single solve's rate
        for c, m in enumerate(self.members):
            params += m.param.params
            own = None if shared is None else shared[:, self.partners.offsets[c]:self.partners.offsets[c + 1]]
            rates = member_rates(m, step, own)
            lrs += rates
            sizes = [p.shape[0] * p.shape[1] for p in m.param.rotation_params]
            same = sum(float(torch.as_tensor(r).eq(m.base_lrs[0]).float().mean()) * size
                       for r, size in zip([rates[0]] + rates[2:], sizes))      # the rotation tensors' rates
            share.append(same / sum(sizes))
        self.stats["single_rate_share"] = share
        self.base_lrs = lrs
        self.optim = solver_adam(params, lrs)
        if continue_from is not None and not self.optim.continue_from(continue_from):
            raise CoreError("The group's variables changed since its solve: retarget the group again.")
        self._ready = True

    def continue_from(self, group: "GroupSolveJob"):
        """Set up as the warm-started re-solve of the finished ``group`` whose members this job's members continue
        (``core.solver.continued.continued_group``): its barrier and the terms between the characters are
        shared, the latter at the members' new per-part weights (``PartnerObjective.with_members``), and its
        optimiser continues."""
        t0 = time.perf_counter()
        self.barrier = group.barrier
        # as the set-up (steps()): the scales' sums are scatters, which only the switch makes reproducible on a GPU
        with torch_threads(self.settings.num_threads), deterministic(self.members[0].settings.device):
            if group.partners is not None:
                p = torch.cat([m.p_init for m in self.members], 1)
                n = torch.cat([m.n_init for m in self.members], 1)
                self.partners = group.partners.with_members(self.members, p, n)
                self.stats["partner_scales"] = {k: v.tolist() for k, v in self.partners.scales.items()}
            self._start_optimiser(group.optim)
        self.notes = list(group.notes)
        self.stats.update(setup_s=time.perf_counter() - t0, setup_reused=True)

    def _alpha(self) -> float:
        return 1.0 if self.members[0].warm_start is not None else alpha_at(self._step, self.total)

    def _adam_step(self) -> Progress:
        s = self.members[0].settings
        step = self._step
        self.optim.lrs = learning_rates(self.base_lrs, step, self.total, s.warmup)
        alpha = self._alpha()
        with deterministic(self.members[0].device):     # as SolveJob._adam_step: only on a GPU
            for p in self.optim.params:
                p.grad = None
            member_terms, ps, ns, parts = [], [], [], []
            yields = any(yields_at(m, step) for m in self.members)   # every member's terms at its per-frame variables
            for m in self.members:
                res = m.param.frame_residuals() if yields else None
                leaves = leaves_of(res) if yields else None
                p, n, sole = m._forward(leaves, alpha)
                member_terms.append(m.terms_at(p, n, sole, alpha))
                if yields:
                    parts.append(job_part(m, res, leaves))
                ps.append(p)
                ns.append(n)
            loss = sum(sum(t.values()) for t in member_terms)
            partner = {}
            if self.partners is not None:
                partner = self.partners.weighted(torch.cat(ps, 1), torch.cat(ns, 1), alpha)
            if self.barrier is not None:
                partner["partner_barrier"] = self.barrier.weighted(
                    [capsule_ends(m) for m in self.members])
            if partner:
                loss = loss + sum(partner.values())
            # as the single solve: gradients per control point are O(1 / controls)
            if yields:
                for m, frames in zip(self.members, yielding_backward(loss, parts, self.members[0].param.num_controls)):
                    m.yielded.append(frames)
            else:
                (loss * self.members[0].param.num_controls).backward()
            self.optim.step()
        vals = {}
        for m, terms in zip(self.members, member_terms):
            mv = {k: float(v.detach()) for k, v in terms.items()}
            m.history.append(mv)
            m.stats["pair_entries_last"] = m._last_entries
            for k, v in mv.items():
                vals[k] = vals.get(k, 0.0) + v
        vals.update({k: float(v.detach()) if torch.is_tensor(v) else float(v) for k, v in partner.items()})
        self.history.append(vals)
        if self.partners is not None:
            self.stats["partner_entries_last"] = self.partners.last_entries
            self.stats["gaze_entries_last"] = self.partners.last_gaze_entries
            self.stats["partner_refreshes"] = self.partners.pairs.refreshes
            self.stats["partner_narrow_blocks"] = self.partners.pairs.narrow_blocks
            self.stats["partner_broad_tests"] = self.partners.pairs.broad_tests
        if self.barrier is not None:
            self.stats["barrier_entries_last"] = self.barrier.last_entries
            self.stats["barrier_refreshes"] = self.barrier.refreshes
            self.stats["barrier_block_refreshes"] = self.barrier.block_refreshes
        self._step += 1
        for m in self.members:
            m._step = self._step
        return Progress(self._step / self.total, step, self.total, float(loss.detach()), vals)


__all__ = ["GroupSolveJob"]
