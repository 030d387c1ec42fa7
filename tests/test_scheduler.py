"""Scheduler with a fake runner: exact block ids, prefix hits, chunking, preemption, aborts."""

from __future__ import annotations

import pytest
from sched_helpers import make_request, make_scheduler, run_step, run_to_completion

from scheduler import FakeRunner, RequestStatus, SamplingParams

pytestmark = pytest.mark.core


def test_first_step_allocates_exact_blocks_and_prefills_whole_prompt() -> None:
    s = make_scheduler(num_blocks=9, block_size=4)
    s.add_request(make_request("a", list(range(10))))
    out = s.schedule()
    (sr,) = out.scheduled
    assert sr.request_id == "a" and sr.num_computed_tokens == 0
    assert sr.token_ids == list(range(10)) and sr.do_sample
    assert sr.block_ids == [1, 2, 3]
    assert out.new_req_ids == ["a"]
    s.update(out, FakeRunner().execute(out))
    st = s.stats()
    assert st.blocks_in_use == 3 and st.blocks_empty == 5
    # Blocks 1 and 2 are full and hashed; 3 holds 2 tokens.
    assert s.kv.num_cached["a"] == 2


def test_decode_grows_one_block_at_boundary_and_frees_tail_first() -> None:
    s = make_scheduler(num_blocks=9, block_size=4)
    runner = FakeRunner()
    s.add_request(make_request("a", list(range(8)), max_tokens=3))
    out, _ = run_step(s, runner)  # prefill 8 tokens (2 full blocks), sample the 9th
    assert out.scheduled[0].block_ids == [1, 2]
    out = s.schedule()  # compute position 8 -> needs block 3 (the view is this step's until update)
    assert out.scheduled[0].token_ids == [1000 + 8 % 7] and out.scheduled[0].num_computed_tokens == 8
    assert out.scheduled[0].block_ids == [1, 2, 3]
    s.update(out, runner.execute(out))
    out, outs = run_step(s, runner)
    assert outs[0].finish_reason == "length"
    # Freed in reverse: 3, 2, 1 appended after the untouched empties 4..8.
    assert s.kv.pool.free_queue.block_ids() == [4, 5, 6, 7, 8, 3, 2, 1]
    assert s.stats().blocks_in_use == 0 and not s.has_unfinished_requests()


def test_prefix_hit_reuses_full_blocks_but_never_whole_prompt() -> None:
    s = make_scheduler(num_blocks=17, block_size=4)
    runner = FakeRunner()
    prompt = list(range(12))
    s.add_request(make_request("a", prompt, max_tokens=1))
    run_to_completion(s, runner)
    s.add_request(make_request("b", prompt + [99, 98], max_tokens=1))
    out = s.schedule()
    (sr,) = out.scheduled
    # Three full blocks of "a" are hits (1, 2, 3); only the last 2 tokens are computed.
    assert sr.block_ids[:3] == [1, 2, 3] and sr.num_computed_tokens == 12
    assert sr.token_ids == [99, 98]
    s.update(out, runner.execute(out))
    # Identical prompt: the last full block is not a hit because one token must be computed.
    s.add_request(make_request("c", prompt, max_tokens=1))
    out = s.schedule()
    assert out.scheduled[0].num_computed_tokens == 8 and out.scheduled[0].token_ids == [8, 9, 10, 11]
    st = s.stats()
    assert st.prefix_hit_tokens == 12 + 8 and st.prefix_query_tokens == 12 + 14 + 12


def test_cache_salt_isolates_prefixes() -> None:
    s = make_scheduler(num_blocks=17, block_size=4)
    runner = FakeRunner()
    prompt = list(range(12))
    s.add_request(make_request("a", prompt, max_tokens=1, cache_salt="tenant-1"))
    run_to_completion(s, runner)
    s.add_request(make_request("b", prompt + [1], max_tokens=1, cache_salt="tenant-2"))
    assert s.schedule().scheduled[0].num_computed_tokens == 0


def test_chunked_prefill_respects_threshold_and_budget() -> None:
    s = make_scheduler(num_blocks=17, block_size=4, long_prefill_token_threshold=5, max_num_batched_tokens=8)
    runner = FakeRunner()
    s.add_request(make_request("a", list(range(13)), max_tokens=2))
    s.add_request(make_request("b", list(range(100, 103)), max_tokens=2))

    def step_chunks() -> dict[str, tuple[int, int, bool]]:
        out = s.schedule()  # read the views before update refreshes them to the next token
        chunks = {r.request_id: (r.num_computed_tokens, len(r.token_ids), r.do_sample) for r in out.scheduled}
        s.update(out, runner.execute(out))
        return chunks

    assert step_chunks() == {"a": (0, 5, False), "b": (0, 3, True)}
    assert step_chunks() == {"a": (5, 5, False), "b": (3, 1, True)}
    assert step_chunks()["a"] == (10, 3, True)


def test_max_num_seqs_limits_admission() -> None:
    s = make_scheduler(num_blocks=33, block_size=4, max_num_seqs=2)
    for i in range(3):
        s.add_request(make_request(f"r{i}", [i, i + 1, i + 2], max_tokens=3))
    out = s.schedule()
    assert [r.request_id for r in out.scheduled] == ["r0", "r1"]
    assert len(s.waiting) == 1


def test_fcfs_preempts_last_admitted_and_recomputes() -> None:
    # 6 usable blocks of 4 tokens. Three requests of 7 tokens take 2 blocks each; decoding needs more.
    s = make_scheduler(num_blocks=7, block_size=4, max_model_len=24)
    runner = FakeRunner()
    for i in range(3):
        s.add_request(make_request(f"r{i}", [10 * i + k for k in range(8)], max_tokens=6, t=float(i)))
    out, _ = run_step(s, runner)
    assert [r.block_ids for r in out.scheduled] == [[1, 2], [3, 4], [5, 6]]
    out, _ = run_step(s, runner)  # every request now needs a 3rd block: r2 (last admitted) is the victim
    assert out.preempted_req_ids == {"r2"}
    assert sorted(r.request_id for r in out.scheduled) == ["r0", "r1"]
    assert s.requests["r2"].status is RequestStatus.PREEMPTED
    assert s.requests["r2"].num_computed_tokens == 0 and s.num_preemptions == 1
    run_to_completion(s, runner)
    assert s.stats().blocks_in_use == 0


def test_priority_policy_order_and_victim() -> None:
    s = make_scheduler(num_blocks=7, block_size=4, max_model_len=24, policy="priority", max_num_seqs=2)
    runner = FakeRunner()
    s.add_request(make_request("low", list(range(7)), max_tokens=6, t=0.0, priority=5))
    s.add_request(make_request("high", list(range(20, 27)), max_tokens=6, t=1.0, priority=0))
    s.add_request(make_request("mid", list(range(40, 47)), max_tokens=6, t=2.0, priority=1))
    out, _ = run_step(s, runner)
    assert [r.request_id for r in out.scheduled] == ["high", "mid"]
    s2 = make_scheduler(num_blocks=7, block_size=4, max_model_len=24, policy="priority")
    for k, (rid, prio, t) in enumerate((("a", 0, 0.0), ("b", 3, 1.0), ("c", 1, 2.0))):
        s2.add_request(make_request(rid, [100 * k + j for j in range(8)], max_tokens=6, t=t, priority=prio))
    run_step(s2, runner)
    out, _ = run_step(s2, runner)
    assert out.preempted_req_ids == {"b"}  # lowest priority (highest value), not the last admitted


def test_abort_waiting_and_running_frees_everything() -> None:
    s = make_scheduler(num_blocks=9, block_size=4, max_num_seqs=1)
    runner = FakeRunner()
    s.add_request(make_request("run", list(range(9)), max_tokens=10))
    s.add_request(make_request("wait", list(range(5)), max_tokens=10))
    run_step(s, runner)
    assert s.stats().blocks_in_use == 3 and len(s.waiting) == 1
    aborted = s.abort_requests(["run", "wait", "unknown"])
    assert {r.request_id for r in aborted} == {"run", "wait"}
    assert all(r.status is RequestStatus.FINISHED_ABORTED for r in aborted)
    st = s.stats()
    assert st.blocks_in_use == 0 and st.num_running == 0 and st.num_waiting == 0
    out = s.schedule()
    assert out.finished_req_ids == {"run", "wait"} and not out.scheduled


def test_stop_token_and_eos_respect_min_tokens() -> None:
    s = make_scheduler(num_blocks=9, block_size=4)
    runner = FakeRunner(token_fn=lambda sr: 7)
    sp = SamplingParams(temperature=0, max_tokens=10, min_tokens=3)
    from scheduler import Request

    s.add_request(Request("e", [1, 2], sp, block_size=4, arrival_time=0.0, eos_token_id=7))
    n = 0
    while s.has_unfinished_requests():
        _, outs = run_step(s, runner)
        n += 1
    assert n == 3  # EOS ignored until 3 tokens were generated
    sp2 = SamplingParams(temperature=0, max_tokens=10, stop_token_ids=[7])
    s.add_request(Request("st", [1, 2], sp2, block_size=4, arrival_time=0.0))
    _, outs = run_step(s, runner)
    assert outs[0].finish_reason == "stop"


def test_prompt_longer_than_max_model_len_rejected() -> None:
    s = make_scheduler(num_blocks=9, block_size=4, max_model_len=16)
    with pytest.raises(ValueError):
        s.add_request(make_request("x", list(range(16))))
    s.add_request(make_request("y", list(range(15)), max_tokens=10))
    run_to_completion(s, FakeRunner())  # stops at max_model_len
    assert s.stats().blocks_in_use == 0


def test_duplicate_request_id_rejected() -> None:
    s = make_scheduler()
    s.add_request(make_request("x", [1, 2]))
    with pytest.raises(ValueError):
        s.add_request(make_request("x", [1, 2]))
