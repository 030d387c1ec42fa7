"""Job inference from the prefix chain: joins, non-merges, cheap (soft) pins, bounded memory."""

from __future__ import annotations

import pytest
from sched_helpers import make_request, pinning, run_to_completion

from scheduler import FakeClock, FakeRunner, LeaseState, Scheduler, SchedulerConfig
from scheduler.invariants import check_invariants
from scheduler.job_index import JobIndex

pytestmark = pytest.mark.core

BS = 4


def _hashes(tokens: list[int]) -> list[int]:
    return make_request("h", tokens, block_size=BS).block_hashes


def _finished_turn(index: JobIndex, job: str, prompt: list[int], output: list[int], strong_joins: int = 0) -> list[int]:
    index.record(job, _hashes(prompt), prompt + output, len(prompt), strong_joins=strong_joins)
    return prompt + output


def test_next_turn_joins_the_job_whose_whole_last_turn_it_extends():
    index = JobIndex(BS)
    system = list(range(100, 112))
    turn1 = _finished_turn(index, "a", system + [1, 2, 3, 4, 5], [6, 7, 8])
    nxt = turn1 + [9, 10, 11, 12]
    match = index.match(nxt, _hashes(nxt))
    assert match is not None and match.job_id == "a" and match.matched_tokens == len(turn1)
    assert index.stats.joins == 1 and len(index) == 0  # running again: out of the index


def test_jobs_sharing_only_a_system_prompt_never_merge():
    index = JobIndex(BS)
    system = list(range(100, 116))  # four full blocks
    _finished_turn(index, "a", system + [1, 2, 3, 4], [5, 6])
    other = system + [7, 7, 7, 7, 7, 7, 7, 7]
    assert index.match(other, _hashes(other)) is None
    # The system prompt plus a different task stops short of job a's whole prompt: never a match.
    near = system + [1, 2, 3, 9, 9, 9, 9, 9]
    assert index.match(near, _hashes(near)) is None
    # The same prompt again, asked anew (identical first turns of two runs): not a continuation either.
    assert index.match(system + [1, 2, 3, 4], _hashes(system + [1, 2, 3, 4])) is None


def test_a_retry_without_the_previous_answer_is_a_weak_join_and_strong_ones_win():
    index = JobIndex(BS)
    system = list(range(100, 116))
    _finished_turn(index, "a", system + [1, 2, 3, 4], [5, 6])
    retry = system + [1, 2, 3, 4, 9, 9, 9, 9]  # the answer dropped, a feedback message added
    assert index.match(retry, _hashes(retry)).job_id == "a"
    assert index.stats.weak_joins == 1
    _finished_turn(index, "a", system + [1, 2, 3, 4], [5, 6])
    _finished_turn(index, "b", system + [1, 2, 3, 4], [7, 8])  # a second run of the same task
    nxt = system + [1, 2, 3, 4, 7, 8, 0]
    assert index.match(nxt, _hashes(nxt)).job_id == "b" and index.stats.weak_joins == 1


def test_enough_of_the_output_must_be_covered():
    index = JobIndex(BS, min_output_fraction=0.5)
    prompt, output = list(range(20, 28)), [1, 2, 3, 4, 5, 6]
    _finished_turn(index, "a", prompt, output)
    retokenized = prompt + output[:3] + [99, 98, 97, 96]  # the client re-rendered the tail differently
    assert index.match(retokenized, _hashes(retokenized)).job_id == "a"
    _finished_turn(index, "a", prompt, output)
    too_little = prompt + output[:2] + [99, 98, 97, 96]
    assert index.match(too_little, _hashes(too_little)).job_id == "a" and index.stats.weak_joins == 1


def test_identical_concurrent_requests_do_not_join_one_job():
    index = JobIndex(BS)
    turn = _finished_turn(index, "a", list(range(30, 38)), [1, 2])
    nxt = turn + [3, 4, 5]
    assert index.match(nxt, _hashes(nxt)).job_id == "a"
    assert index.match(nxt, _hashes(nxt)) is None


def test_longest_previous_turn_wins_and_memory_is_bounded():
    index = JobIndex(BS, max_jobs=2)
    t1 = _finished_turn(index, "a", list(range(40, 48)), [1])
    t2 = _finished_turn(index, "b", t1 + [2, 3, 4, 5], [6])
    nxt = t2 + [7]
    assert index.match(nxt, _hashes(nxt)).job_id == "b"
    assert _finished_turn(index, "c", list(range(60, 68)), [1]) and len(index) == 2
    evicted = index.record("d", _hashes(list(range(70, 78))), list(range(70, 79)), 8, finished_at=3.0)
    assert evicted == [("a", 0.0)] and index.stats.forgotten == 1 and len(index) == 2


def test_idle_jobs_expire_in_finish_order():
    index = JobIndex(BS)
    for job, t in (("a", 1.0), ("b", 5.0), ("c", 9.0)):
        index.record(job, _hashes(list(range(8))), list(range(9)), 8, finished_at=t)
    assert index.expire(6.0) == [("a", 1.0), ("b", 5.0)] and len(index) == 1
    assert index.expire(6.0) == []


def test_short_prompts_and_bad_settings():
    index = JobIndex(BS)
    assert index.record("a", [], [1, 2, 3], 2) == [] and len(index) == 0
    with pytest.raises(ValueError):
        JobIndex(0)
    with pytest.raises(ValueError):
        JobIndex(BS, min_output_fraction=1.5)


def test_an_inferred_job_is_pinned_as_a_cheap_wholly_soft_lease():
    clock = FakeClock()
    cfg = SchedulerConfig(num_blocks=33, block_size=BS, max_model_len=64, policy="continuum", soft_pins=False)
    s = Scheduler(cfg, clock=clock, estimator=pinning(lambda r: 5.0))
    runner = FakeRunner()
    req = make_request("t1", list(range(12)), 4, job_id="inferred-0", hint_source="inferred")
    s.add_request(req)
    run_to_completion(s, runner)
    lease = s.policy.leases.leases["inferred-0"]
    assert lease.state is LeaseState.SOFT and lease.cheap and lease.num_hard == 0 and req.pinned
    assert s.policy.leases.num_pinned_blocks == 0 and s.policy.leases.num_soft_blocks == len(lease.blocks)
    check_invariants(s)
    hinted = make_request("t2", list(range(50, 62)), 4, job_id="declared")
    s.add_request(hinted)
    run_to_completion(s, runner)
    assert s.policy.leases.leases["declared"].num_hard > 0 and hinted.pinned
    check_invariants(s)


def test_a_match_never_crosses_tenants():
    index = JobIndex(BS)
    prompt, output = list(range(20, 28)), [1, 2]
    index.record("a", _hashes(prompt), prompt + output, len(prompt), owner="tenant-a")
    nxt = prompt + output + [3]
    assert index.match(nxt, _hashes(nxt), owner="tenant-b") is None
    assert index.match(nxt, _hashes(nxt)) is None
    assert index.match(nxt, _hashes(nxt), owner="tenant-a").job_id == "a"


def test_a_retry_may_replace_the_generation_prompt_within_the_slack():
    index = JobIndex(BS, prompt_slack=3)
    task = list(range(100, 118))
    opened = task + [7, 8, 9]  # the template's "<|im_start|>assistant\n" opens the answer
    index.record("a", _hashes(opened), opened + [5, 6], len(opened))
    retry = task + [1, 1, 1, 1]  # the answer dropped; a user message follows the task instead
    assert index.match(retry, _hashes(retry)).job_id == "a" and index.stats.weak_joins == 1
    index.record("a", _hashes(opened), opened + [5, 6], len(opened))
    other = task[:-4] + [2, 2, 2, 2, 2, 2]  # a different task sharing only a prefix: never
    assert index.match(other, _hashes(other)) is None
    with pytest.raises(ValueError):
        JobIndex(BS, prompt_slack=-1)



def test_strong_joins_confirm_an_inferred_job_and_confirmed_jobs_pin_hard():
    index = JobIndex(BS)
    conversation = list(range(100, 112)) + [1, 2, 3, 4, 5]
    counts = [0]
    for turn in range(3):  # each finished turn hands the index back the count its request carried
        conversation = _finished_turn(index, "a", conversation, [60 + turn, 70 + turn, 80 + turn], counts[-1])
        conversation = conversation + [90 + turn, 91, 92, 93]
        match = index.match(conversation, _hashes(conversation))
        counts.append(match.strong_joins)
    counts = counts[1:]
    assert counts == [1, 2, 3]
    index.forget("a")
    assert index.match(conversation, _hashes(conversation)) is None

    clock = FakeClock()
    cfg = SchedulerConfig(num_blocks=33, block_size=BS, max_model_len=64, policy="continuum", soft_pins=False)
    s = Scheduler(cfg, clock=clock, estimator=pinning(lambda r: 5.0))
    req = make_request("t1", list(range(12)), 4, job_id="inferred-x", hint_source="inferred", confirmed=True)
    assert req.job_inferred and req.job_confirmed
    s.add_request(req)
    run_to_completion(s, FakeRunner())
    lease = s.policy.leases.leases["inferred-x"]
    assert lease.num_hard > 0 and not lease.cheap  # as good as a declared job's
    check_invariants(s)
