"""Seeded random blast: thousands of steps with arrivals, aborts, pins and clock jumps; invariants every
step."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler import (
    ContinuumPolicy,
    FakeClock,
    JobHints,
    Lease,
    ModelRunnerOutput,
    Request,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
    SchedulerOutput,
)
from scheduler.invariants import check_invariants
from scheduler.job_hints import INFERRED
from scheduler.tier_copy import SAVE
from tests.sched_helpers import StubEstimator, pinning

pytestmark = pytest.mark.core


class TruthRunner:
    """A runner that keeps the token each KV slot really holds, and checks every read.

    Like the real runner, it writes the whole batch's new tokens first, then each request reads its
    context ``[0, num_computed_tokens)``; a slot holding anything but the request's own token at that
    position means the prefix cache handed out KV that was never computed (or was overwritten).
    """

    def __init__(self, sched: Scheduler, rng: random.Random) -> None:
        self.sched, self.rng = sched, rng
        self.slots: dict[tuple[int, int], int] = {}
        self.tier: dict[tuple[int, int], int] = {}  # (tier slot, offset) -> token, moved by ``kv_copies``
        self.reads = 0
        self.copies = 0

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        bs = self.sched.config.block_size
        for kind, src, dst in out.kv_copies:  # second-tier moves first, in their order
            store_src, store_dst = (self.slots, self.tier) if kind == SAVE else (self.tier, self.slots)
            for k in range(bs):
                store_dst.pop((dst, k), None)
                if (src, k) in store_src:
                    store_dst[(dst, k)] = store_src[(src, k)]
            self.copies += 1
        for sr in out.scheduled:
            for j, tok in enumerate(sr.token_ids):
                p = sr.num_computed_tokens + j
                self.slots[(sr.block_ids[p // bs], p % bs)] = tok
        for sr in out.scheduled:
            toks = self.sched.requests[sr.request_id].all_token_ids
            for p in range(sr.num_computed_tokens):
                assert self.slots.get((sr.block_ids[p // bs], p % bs)) == toks[p], (
                    f"{sr.request_id} reads stale KV at position {p}"
                )
                self.reads += 1
        res = ModelRunnerOutput()
        for sr in out.scheduled:
            if sr.do_sample:
                res.sampled_token_ids[sr.request_id] = self.rng.randrange(5)
        return res


def _leases(s: Scheduler) -> dict[str, Lease]:
    """The live CONTINUUM leases of ``s`` (none under other policies)."""
    return s.policy.leases.leases if isinstance(s.policy, ContinuumPolicy) else {}


def _verify_blocked_shortcut(s: Scheduler) -> None:
    """Wrap the O(1) 'still blocked' memo: whenever it says blocked, a full check must agree."""
    fast = s.admission_memo.still_blocked

    def checked(req, budget: int) -> bool:
        verdict = fast(req, budget)
        if verdict:
            hits, num_hit, num_load, num_new = s._plan(req, s.config.long_prefill_token_threshold, budget)
            bs = s.config.block_size
            required = -(-(num_hit + num_load + num_new) // bs) - len(hits)
            evictable = sum(1 for b in hits if b.ref_cnt == 0)
            yieldable = sum(le.num_soft for le in _leases(s).values()
                            if le.job_id != req.job_id and le.job_arrival_time > req.job_arrival_time)
            assert required > s.kv.pool.num_free_blocks - evictable + yieldable, (
                "shortcut blocked an admissible request"
            )
            checked.hits += 1
        return verdict

    checked.hits = 0
    s.admission_memo.still_blocked = checked


def _blast(policy: str, seed: int, steps: int = 3000, cap: float | None = None, tier: bool = False) -> Scheduler:
    """``policy`` may be ``continuum-hard``: CONTINUUM with soft pins off. ``cap`` overrides the
    drawn ``max_pinned_fraction``; ``tier`` adds a second KV tier of a drawn size."""
    soft = policy != "continuum-hard"
    policy = policy.removesuffix("-hard")
    rng = random.Random(seed)
    cheap_rng = random.Random(seed + 1000)
    clock = FakeClock()
    bs = rng.choice([1, 2, 4, 8])
    num_blocks = rng.randint(12, 48)
    cfg = SchedulerConfig(
        num_blocks=num_blocks,
        block_size=bs,
        max_num_seqs=rng.randint(1, 8),
        max_num_batched_tokens=rng.randint(4, 64),
        max_model_len=min(64, (num_blocks - 1) * bs),
        long_prefill_token_threshold=rng.choice([0, 3, 7]),
        policy=policy,
        max_pinned_fraction=rng.choice([0.0, 0.3, 0.5, 1.0]) if cap is None else cap,
        soft_pins=soft,
        soft_pin_grace=0.0 if seed == 2 else 2.0,
        max_pinned_fraction_per_tenant=rng.choice([1.0, 0.5, 0.25]),
        num_offload_blocks=rng.choice([1, 3, 8, 40]) if tier else 0,
    )
    returns = random.Random(seed + 7)  # expected tool returns for the tier's prefetch: due, later or unknown
    s = Scheduler(cfg, clock=clock, estimator=StubEstimator(
        lambda r: rng.choice([0.0, 0.5, 2.0, 10.0]),
        lambda job, tenant: returns.choice([None, clock.now() - 1.0, clock.now() + 0.5, clock.now() + 30.0])))
    _verify_blocked_shortcut(s)
    runner = TruthRunner(s, rng)
    jobs: dict[str, list[int]] = {}
    n = 0
    pinned_ids: dict[int, str] = {}
    for _ in range(steps):
        if rng.random() < 0.3:
            job = f"j{rng.randrange(6)}"
            # Turns of a job extend its previous prompt, so prefix hits and pins really interact.
            base = jobs.get(job, [rng.randrange(5) for _ in range(rng.randint(1, 6))])
            prompt = (base + [rng.randrange(5) for _ in range(rng.randint(1, 6))])[-(cfg.max_model_len - 8) :]
            jobs[job] = prompt
            sp = SamplingParams(temperature=0, max_tokens=rng.randint(1, 8), ignore_eos=rng.random() < 0.5)
            hints = JobHints.for_job(job, priority=rng.randrange(3), is_last_step=rng.random() < 0.2,
                                     tenant=f"t{int(job[1:]) % 2}")
            # Some cheap (wholly soft) leases, as inferred jobs have, from a stream of their own.
            if cap is None and cheap_rng.random() < 0.2:
                hints = replace(hints, hint_source=INFERRED)
            s.add_request(Request(f"r{n}", prompt, sp, block_size=bs, arrival_time=clock.now(), eos_token_id=0,
                                  hints=hints, job_arrival_time=float(int(job[1:]))))
            n += 1
        if s.requests and rng.random() < 0.05:
            s.abort_requests([rng.choice(list(s.requests))])
        if rng.random() < 0.03:
            s.release_job(f"j{rng.randrange(6)}")
        if rng.random() < 0.2:
            clock.advance(rng.choice([0.1, 0.6, 3.0]))
        # Remember which block each lease holds, to check nobody else gets it while pinned.
        pinned_ids = {b.block_id: j for j, le in _leases(s).items() for b in le.blocks}
        out = s.schedule()
        check_invariants(s)
        # Blocks still held by the same lease after the step (a soft tail may have been given up).
        held_after = {b.block_id: j for j, le in _leases(s).items() for b in le.blocks}
        for sr in out.scheduled:
            owner = s.requests[sr.request_id].job_id
            for bid in sr.block_ids:
                if bid in pinned_ids and held_after.get(bid) == pinned_ids[bid]:
                    # A live pinned block may only be shared as a prefix hit (cached content).
                    assert s.kv.pool.blocks[bid].block_hash is not None or pinned_ids[bid] == owner
        s.update(out, runner.execute(out))
        check_invariants(s)
    # Drain: let every request finish, then end every pin.
    for _ in range(10_000):
        if not s.has_unfinished_requests():
            break
        out = s.schedule()
        s.update(out, runner.execute(out))
        check_invariants(s)
    assert not s.has_unfinished_requests()
    for _ in range(2):  # TTLs run out, then the soft grace of the expired pins
        clock.advance(1000.0)
        s.schedule()
        check_invariants(s)
    pool = s.kv.pool
    assert pool.num_used_blocks == 0 and pool.num_free_blocks == pool.num_blocks - 1
    s._truth_reads = runner.reads
    s._tier_copies = runner.copies
    return s


@pytest.mark.parametrize("policy", ["fcfs", "priority", "continuum", "continuum-hard"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blast_invariants(policy: str, seed: int) -> None:
    s = _blast(policy, seed)
    assert s._truth_reads > 0
    if seed == 1:
        assert s.num_preemptions > 0  # this seed's pool is tight enough to preempt
        assert s.admission_memo.still_blocked.hits > 0  # the blocked-admission memo was used and verified
    if policy.startswith("continuum"):
        assert s.policy.leases.counters.created > 0 and s.policy.leases.counters.hit > 0
    if policy == "continuum" and s.config.max_pinned_fraction < 1.0:
        assert s.policy.leases.counters.soft_yielded > 0  # soft tails were held past the cap and given up


@pytest.mark.parametrize(("seed", "cap"), [(1, 0.0), (3, 0.3)])
def test_blast_soft_pins_under_tight_caps(seed: int, cap: float) -> None:
    """Most of every pin is a soft tail here (all of it at cap 0): the invariants and the pinned-block
    check above hold, and the block-seconds counters never run backwards."""
    s = _blast("continuum", seed, steps=2000, cap=cap)
    c = s.policy.leases.counters
    assert c.soft_yielded > 0 and c.created > 0
    assert c.created == c.hit + c.expired + c.early_released + c.released + c.aborted  # each ends once
    assert c.soft_block_seconds > 0 and c.pinned_block_seconds >= 0
    if cap == 0.0:
        assert c.pinned_block_seconds == 0 and c.rejected_cap == c.created


@pytest.mark.parametrize("policy", ["fcfs", "priority", "continuum"])
def test_no_stale_kv_under_heavy_preemption(policy: str) -> None:
    """Regression: a victim preempted after it was scheduled in the same step, or any block hashed
    before its step ran, must never become a prefix hit (the TruthRunner checks every read)."""
    reads = 0
    for seed in range(60):
        rng = random.Random(seed)
        clock = FakeClock()
        cfg = SchedulerConfig(num_blocks=9, block_size=4, max_model_len=32, max_num_batched_tokens=12,
                              long_prefill_token_threshold=rng.choice([0, 3, 5, 6]), policy=policy)
        s = Scheduler(cfg, clock=clock, estimator=pinning(lambda r: 1.0))
        runner = TruthRunner(s, rng)
        base = [rng.randrange(50) for _ in range(24)]
        for n in range(400):
            if rng.random() < 0.3 and len(s.requests) < 6:
                size = rng.randint(3, 20)
                prompt = base[: rng.randint(0, size)]
                prompt += [rng.randrange(50) for _ in range(size - len(prompt))]
                sp = SamplingParams(max_tokens=rng.randint(1, 10))
                priority = rng.randrange(5)
                hints = JobHints.for_job(f"j{rng.randrange(3)}", priority=priority)
                s.add_request(Request(f"r{n}", prompt, sp, block_size=4, arrival_time=clock.now(), hints=hints,
                                      job_arrival_time=clock.now() - rng.random() * 10))
            out = s.schedule()
            s.update(out, runner.execute(out))
            clock.advance(0.1)
        reads += runner.reads
    assert reads > 0


@pytest.mark.parametrize("policy", ["fcfs", "continuum"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_blast_with_second_tier(policy: str, seed: int) -> None:
    """With a second KV tier: every read after a load sees the KV that was saved (the TruthRunner moves
    tokens as the copies say), every tier entry leaves exactly once, and hashes never sit in both tiers."""
    s = _blast(policy, seed, steps=2000, tier=True)
    c = s.kv.tier.counters
    assert s._truth_reads > 0 and s._tier_copies > 0
    assert c.stored > 0 and c.reloaded > 0, c
    assert c.stored == c.reloaded + c.dropped + c.cleared + len(s.kv.tier.entries)
