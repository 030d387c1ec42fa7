"""Pure pieces of the server, no engine and no sockets: ``ServerConfig`` and the serve flags, request
parsing and validation, response formatting, error bodies, the Prometheus rendering."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from pydantic import ValidationError

from agent_engine.engine.engine_stats import EngineStats
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.outputs import CompletionOutput, RequestMetrics, RequestOutput
from agent_engine.server.errors import APIError, bad_request, error_body
from agent_engine.server.launcher import parse_prometheus
from agent_engine.server.metrics import PIN_COUNTER_NAMES, ServerMetrics
from agent_engine.server.openai_call import (
    DONE,
    chat_logprobs,
    completion_logprobs,
    logprob_slice,
    sse,
    usage,
)
from agent_engine.server.openai_schema import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    sampling_params,
)
from agent_engine.server.server_config import LOG_LEVELS, ServerConfig
from scheduler import JobRecord, LeaseCounters, SchedulerStats
from scheduler.job_hints import tenant_job_id
from scheduler.job_record import JobCompletion

pytestmark = pytest.mark.core

# Every server flag: dest -> (default, type, choices, help). The --help text of these must not drift.
SERVER_FLAGS = {
    "host": ("127.0.0.1", None, None, "address to listen on (default: 127.0.0.1)"),
    "port": (8000, int, None, "TCP port to listen on (default: 8000)"),
    "max_waiting": (None, int, None,
                    "answer 503 + Retry-After when more than N requests are queued (default: unbounded)"),
    "drain_timeout": (10.0, float, None,
                      "seconds in-flight requests may run after SIGTERM before they are aborted "
                      "(default: 10)"),
    "log_level": ("info", None, ["critical", "error", "warning", "info", "debug"],
                  "log level of the server and uvicorn (default: info)"),
}


def _serve_parser() -> argparse.ArgumentParser:
    from agent_engine.server.serve import add_arguments

    parser = argparse.ArgumentParser(prog="agent-engine serve")
    add_arguments(parser)
    return parser


def test_serve_help_documents_every_flag():
    from agent_engine.config import EngineConfig

    parser = _serve_parser()
    text = parser.format_help()
    flags = ["--" + f.name.replace("_", "-") for f in dataclasses.fields(EngineConfig)]
    flags += ["--host", "--port", "--api-key", "--max-waiting", "--drain-timeout"]
    for flag in flags:
        assert flag in text, flag
    for action in parser._actions:
        assert action.help, action.option_strings
    args = parser.parse_args(["--policy", "continuum", "--num-kv-blocks", "64", "--port", "0"])
    assert (args.policy, args.num_kv_blocks, args.host) == ("continuum", 64, "127.0.0.1")


def test_server_flags_are_unchanged_and_match_the_config_defaults():
    parser = _serve_parser()
    group = next(g for g in parser._action_groups if g.title == "server options")
    got = {a.dest: (a.default, a.type, a.choices, a.help) for a in group._group_actions}
    assert got == SERVER_FLAGS
    assert [a.option_strings for a in group._group_actions] == [
        ["--host"], ["--port"], ["--max-waiting"], ["--drain-timeout"], ["--log-level"]]
    security = next(g for g in parser._action_groups if g.title == "security options")
    assert [a.option_strings for a in security._group_actions] == [
        ["--api-key"], ["--api-keys-file"], ["--open-metrics"], ["--share-prefix-cache"], ["--max-body-bytes"],
        ["--admin-key"], ["--header-timeout"], ["--body-timeout"]]
    fairness = next(g for g in parser._action_groups if g.title == "fairness options")
    assert [a.option_strings for a in fairness._group_actions] == [
        ["--tenant-max-requests"], ["--tenant-max-open-jobs"], ["--max-prompts-per-request"], ["--max-request-tokens"], ["--tenant-body-rate"], ["--tokenizer-workers"],
        ["--grammar-compile-timeout"], ["--max-grammar-size"], ["--grammar-workers"], ["--health-stall-timeout"]]
    limits = [parser.get_default(d) for d in ("grammar_compile_timeout", "max_grammar_size", "grammar_workers")]
    assert GrammarLimits(*limits) == ServerConfig().grammar_limits
    assert parser.get_default("health_stall_timeout") == ServerConfig().health_stall_timeout
    defaults = ServerConfig()
    assert {k: getattr(defaults, k) for k in SERVER_FLAGS} == {k: v[0] for k, v in SERVER_FLAGS.items()}
    assert parser.get_default("func").__name__ == "run_serve"


def test_server_config_from_args():
    parser = _serve_parser()
    args = parser.parse_args(["--host", "0.0.0.0", "--port", "9001", "--api-key", "k", "--api-key", "k2",
                              "--max-waiting", "3", "--drain-timeout", "2.5", "--log-level", "debug",
                              "--open-metrics", "--max-body-bytes", "4096", "--admin-key", "adm",
                              "--tenant-max-requests", "5", "--tenant-max-open-jobs", "11",
                              "--max-prompts-per-request", "7",
                              "--max-request-tokens", "900", "--tokenizer-workers", "3",
                              "--header-timeout", "4", "--body-timeout", "6", "--grammar-compile-timeout", "2.5",
                              "--max-grammar-size", "5000", "--grammar-workers", "3", "--health-stall-timeout", "9"])
    cfg = ServerConfig.from_args(args)
    assert cfg == ServerConfig(host="0.0.0.0", port=9001, api_keys=("k", "k2"), max_waiting=3, drain_timeout=2.5,
                               log_level="debug", open_metrics=True, max_body_bytes=4096, admin_keys=("adm",),
                               tenant_max_requests=5, tenant_max_open_jobs=11, max_prompts=7,
                               max_request_tokens=900,
                               tokenizer_workers=3, header_timeout=4.0, body_timeout=6.0,
                               grammar_limits=GrammarLimits(2.5, 5000, 3), health_stall_timeout=9.0)
    for bad in ({"tenant_max_requests": 0}, {"tenant_max_open_jobs": 0}, {"max_prompts": 0}, {"tokenizer_workers": 0}, {"body_timeout": 0},
                {"health_stall_timeout": 0}):
        with pytest.raises(ValueError):
            ServerConfig(**bad)
    with pytest.raises(ValueError, match="max_body_bytes"):
        ServerConfig(max_body_bytes=10)
    assert ServerConfig.from_args(parser.parse_args([])) == ServerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.port = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="log_level"):
        ServerConfig(log_level="loud")
    assert set(LOG_LEVELS) == set(SERVER_FLAGS["log_level"][2])


def test_serving_token_budget_by_device():
    """Unset, the step budget is 2048, except a server on CPU, which measures it; a budget the user set
    is never replaced (tests/test_step_budget.py: the measurement)."""
    from agent_engine.config import DEFAULT_TOKEN_BUDGET, MEASURED_TOKEN_BUDGET, EngineConfig
    from agent_engine.engine.factory import serving_config

    unset = EngineConfig()
    assert unset.max_num_batched_tokens is None and unset.token_budget == DEFAULT_TOKEN_BUDGET == 2048
    assert unset.scheduler_config(10, 64).max_num_batched_tokens == DEFAULT_TOKEN_BUDGET
    assert unset.for_serving("cpu").max_num_batched_tokens == MEASURED_TOKEN_BUDGET
    assert unset.for_serving("cuda").token_budget == unset.for_serving("cuda:1").token_budget == 2048
    chosen = EngineConfig(max_num_batched_tokens=4096)
    assert chosen.for_serving("cpu") is chosen and chosen.token_budget == 4096
    assert serving_config(EngineConfig(device="cpu")).measures_token_budget
    args = _serve_parser().parse_args(["--max-num-batched-tokens", "512"])
    assert EngineConfig.from_args(args).for_serving("cpu").token_budget == 512
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        EngineConfig(max_num_batched_tokens=-5)


def test_completion_prompt_forms():
    assert CompletionRequest(prompt="hi").prompts() == ["hi"]
    assert CompletionRequest(prompt=[1, 2]).prompts() == [[1, 2]]
    assert CompletionRequest(prompt=["a", "b"]).prompts() == ["a", "b"]
    assert CompletionRequest(prompt=[[1], [2, 3]]).prompts() == [[1], [2, 3]]
    assert CompletionRequest(prompt=[]).prompts() == []
    for bad in (12, [1.5], {"x": 1}, [True, "a"]):
        with pytest.raises(ValidationError):
            CompletionRequest(prompt=bad)
    assert CompletionRequest(prompt="x", unknown_field=1).prompts() == ["x"]  # unknown fields are ignored


def test_hints_and_usage_flags():
    req = CompletionRequest(prompt="x", session_id="s", stream=True, stream_options={"include_usage": True})
    assert req.include_usage()
    assert not CompletionRequest(prompt="x").include_usage()
    with pytest.raises(ValidationError):
        CompletionRequest(prompt="x", tool_ttl_hint=-1)


def test_chat_messages_to_template_dicts():
    m = ChatMessage(role="user", content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    name="n", tool_call_id="t")
    assert m.as_template_dict() == {"tool_call_id": "t", "role": "user", "content": "ab", "name": "n"}
    empty = ChatMessage(role="assistant", content=None)
    assert empty.as_template_dict() == {"role": "assistant", "content": ""}
    with pytest.raises(ValueError, match="image_url"):
        ChatMessage(role="user", content=[{"type": "image_url"}]).as_template_dict()
    with pytest.raises(ValidationError):
        ChatCompletionRequest(messages=[])


def test_sampling_params_mapping_and_rejections():
    sp = sampling_params(CompletionRequest(prompt="x", temperature=0, stop="END", stop_token_ids=[3], seed=1,
                                           logprobs=2, top_k=5, min_tokens=1), 7)
    assert (sp.temperature, sp.max_tokens, sp.stop, sp.stop_token_ids, sp.seed, sp.logprobs, sp.top_k,
            sp.min_tokens) == (0, 7, ("END",), (3,), 1, 2, 5, 1)
    user = [{"role": "user", "content": "x"}]
    chat = sampling_params(ChatCompletionRequest(messages=user, logprobs=True), 4)
    assert chat.logprobs == 0 and chat.temperature == 1.0 and chat.top_p == 1.0
    chat3 = ChatCompletionRequest(messages=user, logprobs=True, top_logprobs=3)
    assert sampling_params(chat3, 4).logprobs == 3
    bad = [CompletionRequest(prompt="x", n=2), CompletionRequest(prompt="x", presence_penalty=0.5),
           CompletionRequest(prompt="x", frequency_penalty=1), CompletionRequest(prompt="x", echo=True),
           CompletionRequest(prompt="x", suffix="s"), CompletionRequest(prompt="x", temperature=-1),
           CompletionRequest(prompt="x", top_p=0),
           ChatCompletionRequest(messages=user, top_logprobs=2)]
    for req in bad:
        with pytest.raises(ValueError):
            sampling_params(req, 4)


def test_sse_usage_and_done():
    assert sse({"a": "é", "b": [1]}) == 'data: {"a":"é","b":[1]}\n\n'
    assert DONE == "data: [DONE]\n\n"
    assert usage(3, 2, 1) == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
                              "prompt_tokens_details": {"cached_tokens": 1}}


def test_logprob_objects():
    strs = {1: "ab", 2: "c", 3: "é"}
    assert completion_logprobs([1, 2], None, None, strs) is None
    lp = completion_logprobs([1, 2], [-0.1, -0.2], [[(1, -0.1), (3, -2.0)], [(2, -0.2)]], strs, offset=5)
    assert lp == {"tokens": ["ab", "c"], "token_logprobs": [-0.1, -0.2],
                  "top_logprobs": [{"ab": -0.1, "é": -2.0}, {"c": -0.2}], "text_offset": [5, 7]}
    chat = chat_logprobs([3], [-0.5], [[(3, -0.5), (2, -1.0)]], strs)
    assert chat == {"content": [{"token": "é", "logprob": -0.5, "bytes": [195, 169], "top_logprobs": [
        {"token": "é", "logprob": -0.5, "bytes": [195, 169]},
        {"token": "c", "logprob": -1.0, "bytes": [99]}]}]}
    assert chat_logprobs([3], None, None, strs) is None
    out = RequestOutput("r", None, [1], [CompletionOutput(0, "abc", [1, 2, 3], None, [-1.0, -2.0, -3.0],
                                                          [[(1, -1.0)], [(2, -2.0)], [(3, -3.0)]])], False)
    assert logprob_slice(out, 1) == ([2, 3], [-2.0, -3.0], [[(2, -2.0)], [(3, -3.0)]])


def test_error_bodies():
    want = {"error": {"message": "m", "type": "t", "param": "p", "code": "c"}}
    assert error_body("m", "t", "p", "c") == want
    for status, err_type in ((400, "invalid_request_error"), (401, "authentication_error"),
                             (404, "not_found_error"), (500, "internal_server_error"),
                             (503, "service_unavailable_error"), (418, "api_error")):
        assert APIError(status, "m").body()["error"]["type"] == err_type
    err = bad_request("nope", param="prompt", code="x")
    assert (err.status_code, err.body()) == (400, error_body("nope", "invalid_request_error", "prompt", "x"))


def _engine_stats(**scheduler: object) -> EngineStats:
    """An ``EngineStats`` whose scheduler figures are 0 but for ``scheduler``."""
    zero = {f.name: 0 for f in dataclasses.fields(SchedulerStats) if f.name not in ("pins", "tier")}
    return EngineStats(SchedulerStats(**{**zero, **scheduler}), num_failed_steps=0, max_model_len=64, block_size=16)


def _job_ended(m: ServerMetrics, tenant: str | None, turns: int, jct: float, released: bool = False) -> None:
    """The job table tells the metrics' listener of a job the estimator ended (its record's ``completion``)."""
    record = JobRecord(tenant_job_id(tenant, "job"), tenant=tenant)
    record.completion = JobCompletion(turns, jct)
    if released:
        m.job_ends.on_job_release(record, 0.0)
    else:
        m.job_ends.on_job_abandon(record, 0.0)


def test_metrics_render_stats_and_listeners():
    m = ServerMetrics()
    comp = CompletionOutput(0, "ab", [1, 2], "length")
    metrics = RequestMetrics(arrival_time=1.0, first_token_time=1.5, finished_time=2.0)
    m.on_output(RequestOutput("r", "p", [7, 8, 9], [comp], True, new_token_ids=[1, 2], metrics=metrics,
                              job_id="j1"), 2.0)
    m.on_output(RequestOutput("s", "p", [7], [comp], True, new_token_ids=[1], job_id="j2"), 2.0)
    m.on_abort("t")
    pins = LeaseCounters(**dict.fromkeys(PIN_COUNTER_NAMES, 2))
    stats = _engine_stats(num_running=3, prefix_hit_tokens=4, pins=pins, pinned_block_seconds=1.5)
    text = m.render(stats).decode()
    got = parse_prometheus(text)
    assert got["agent_engine_requests_running"] == 3
    assert got["agent_engine_prefix_cache_hit_tokens_total"] == 4
    assert all(got[f"agent_engine_pins_{k}_total"] == 2 for k in PIN_COUNTER_NAMES)
    assert got["agent_engine_pinned_block_seconds_total"] == 1.5
    assert "agent_engine_kv_tier_blocks" not in text and "agent_engine_job_inference_joins_total" not in text
    assert got["agent_engine_requests_finished_total"] == 3 and got["agent_engine_prompt_tokens_total"] == 4
    assert got["agent_engine_time_to_first_token_seconds_count"] == 1
    assert "job_id=" not in text  # job ids are client data: never a label
    assert 'agent_engine_job_turns_by_hint_total{hint_source="none",tenant="default"} 2.0' in text
    m.on_job_released()  # the route's count; the job's turns come from the engine's job table
    _job_ended(m, None, turns=3, jct=2.0, released=True)
    _job_ended(m, None, turns=5, jct=4.0)  # ended by its last step: no release observed
    again = parse_prometheus(m.render(None).decode())  # no snapshot yet: no engine series
    assert "agent_engine_requests_running" not in again and again["agent_engine_jobs_released_total"] == 1
    assert again["agent_engine_job_turns_at_release_count"] == 1 and again["agent_engine_job_turns_at_release_sum"] == 3
    assert again["agent_engine_job_completion_seconds_count"] == 2


def test_a_tenant_reads_only_its_own_series():
    m = ServerMetrics()
    comp = CompletionOutput(0, "ab", [1, 2], "stop")
    for rid, tenant, n in (("a", "t-aaa", 2), ("b", "t-bbb", 3)):
        m.on_output(RequestOutput(rid, "p", [7] * n, [comp], True, new_token_ids=[1], tenant=tenant), 1.0)
    m.on_abort("c", "t-bbb")
    _job_ended(m, "t-aaa", turns=2, jct=5.0)  # the tenant is the record's field, never read from the id
    stats = _engine_stats(num_running=3)
    everything = parse_prometheus(m.render(stats).decode())
    assert everything["agent_engine_prompt_tokens_total"] == 5 and everything["agent_engine_requests_running"] == 3
    own = m.render(stats, "t-aaa", sees_all=False).decode()
    got = parse_prometheus(own)
    assert got["agent_engine_prompt_tokens_total"] == 2 and got["agent_engine_requests_finished_total"] == 1
    assert got["agent_engine_job_completion_seconds_count"] == 1
    assert "t-bbb" not in own and "agent_engine_requests_running" not in own  # engine-wide: admins only
    other = parse_prometheus(m.render(stats, "t-bbb", sees_all=False).decode())
    assert other["agent_engine_requests_finished_total"] == 2 and "agent_engine_job_completion_seconds_count" not in other


def test_llm_engine_and_the_fake_engine_have_every_member_the_server_uses():
    import inspect

    from server_fixtures import FakeEngine

    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.server.engine_like import EngineLike

    members = set(EngineLike.__annotations__) | {
        name for name, value in vars(EngineLike).items() if inspect.isfunction(value) and not name.startswith("_")}
    assert {"add_request", "step", "knows_job", "release_all_jobs", "stats", "routing_stats", "config"} <= members
    assert isinstance(FakeEngine(), EngineLike)
    init = inspect.getsource(LLMEngine.__init__)  # no model here: data members are the ones __init__ sets
    missing = [m for m in members if not callable(getattr(LLMEngine, m, None)) and f"self.{m} =" not in init]
    assert missing == []

