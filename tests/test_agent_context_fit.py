"""An agent's conversation kept inside the model's context (``agent_engine.agent.context_fit``): nothing
changes while the prompt fits; past the budget the oldest observations are elided first, then old
answers cut, the last observations cut, old turns dropped and the map dropped (the system prompt and the
task never), each once, the conversation staying well formed; the estimate is the server's own count;
and a live job against a server with a small context, or one that refuses prompts as too long, runs
to its end instead of failing on ``context_length_exceeded``."""

from __future__ import annotations

import json

import httpx
import pytest
from agent_fakes import FakeServer, answer, run_jobs

from agent_engine.agent.chat import ChatError
from agent_engine.agent.context_fit import ELIDED, LEVELS, ContextFit, message_chars
from agent_engine.agent.job_runner import AgentTask
from agent_engine.agent.loop import AgentConfig
from agent_engine.agent.text_interface import REPO_MAP_HEADING

pytestmark = pytest.mark.core


def conversation(observations: int, chars: int) -> list[dict]:
    msgs = [{"role": "system", "content": "s" * 30}, {"role": "user", "content": "task " * 10}]
    for i in range(observations):
        msgs.append({"role": "assistant", "content": None,
                     "tool_calls": [{"id": f"c{i}", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": str(i) * chars})
    return msgs


def test_nothing_is_elided_while_the_prompt_fits() -> None:
    msgs = conversation(3, 100)
    before = [dict(m) for m in msgs]
    fit = ContextFit(context_tokens=2000, reserve_tokens=100)
    assert fit.fit(msgs) == 0 and msgs == before


def test_the_oldest_observations_go_first_and_the_last_two_stay() -> None:
    msgs = conversation(5, 900)  # about 1,500 tokens at 3 characters a token
    fit = ContextFit(context_tokens=1000, reserve_tokens=100)
    done = fit.fit(msgs)
    assert done == 3 and fit.elided == 3
    tools = [m for m in msgs if m["role"] == "tool"]
    assert [t["content"] for t in tools[:3]] == [ELIDED.format(chars=900, gist=f"; it began: {str(i) * 57}...")
                                                 for i in range(3)]
    assert tools[3]["content"] == "3" * 900 and tools[4]["content"] == "4" * 900
    assert msgs[0]["content"] == "s" * 30 and msgs[1]["content"] == "task " * 10
    assert [m["role"] for m in msgs] == [m["role"] for m in conversation(5, 900)]
    assert [m.get("tool_call_id") for m in msgs] == [m.get("tool_call_id") for m in conversation(5, 900)]
    assert fit.fit(msgs) == 0  # nothing elided twice, the last two kept even over the budget


def test_the_estimate_learns_the_servers_count() -> None:
    msgs = conversation(2, 300)
    fit = ContextFit(context_tokens=4096, reserve_tokens=512)
    fit.observe(msgs, prompt_tokens=message_chars(msgs) // 2)  # two characters a token on this model
    assert abs(fit.estimate(msgs) - message_chars(msgs) / 2) <= 2


def test_a_config_with_no_room_for_a_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match="no room"):
        AgentConfig(context_tokens=300, max_tokens=256)


def test_a_job_against_a_small_context_runs_to_its_end() -> None:
    """1,200-character outputs, a 1,400-token context and 32-token answers: without elision the fifth
    prompt would be refused; with it the job makes all its calls."""
    noisy = [answer(f"python3 -c \"print('{c}' * 1200)\"") for c in "abcde"]
    server = FakeServer([*noisy, answer("echo done")], max_model_len=1400)
    result = run_jobs([AgentTask("print a lot", None)], server, step_limit=6)
    job = result.results[0].job
    assert job.error is None and job.steps == 6 and job.exit_status == "LimitsExceeded"
    assert job.elided >= 2
    last = server.chat_bodies()[-1]["messages"]
    assert sum(1 for m in last if str(m.get("content", "")).startswith("[earlier output elided")) == job.elided


# --------------------------------------------------------------------------- measured in the server's tokens


def test_the_estimate_starts_from_the_servers_count_of_the_last_prompt() -> None:
    msgs = conversation(2, 300)
    fit = ContextFit(context_tokens=4096, reserve_tokens=512, overhead_chars=900)
    assert fit.estimate(msgs) == (message_chars(msgs) + 900) // 3 + 1  # no count yet: the guess
    fit.observe(msgs, prompt_tokens=700)  # the template and the tools' schemas are in the count
    assert fit.estimate(msgs) == 701
    grown = [*msgs, {"role": "tool", "tool_call_id": "c9", "content": "x" * 600}]
    assert fit.estimate(grown) == 701 + int(600 * fit.tokens_per_char)


def test_a_refusal_raises_the_estimate_over_the_budget_and_the_next_fit_aims_lower() -> None:
    msgs = conversation(6, 600)
    fit = ContextFit(context_tokens=2000, reserve_tokens=200)
    assert fit.estimate(msgs) <= fit.budget  # the guess says it fits; the server said no
    fit.refused(msgs)
    assert fit.estimate(msgs) > fit.budget
    assert fit.fit(msgs, attempt=2) > 0 and fit.estimate(msgs) <= fit.budget * LEVELS[2]


def test_old_answers_are_cut_and_stay_json() -> None:
    msgs = conversation(4, 100)
    big = json.dumps({"path": "calc.py", "old_text": "a" * 3000, "new_text": "b" * 3000})
    msgs[2]["tool_calls"][0]["function"]["arguments"] = big
    fit = ContextFit(context_tokens=1000, reserve_tokens=100)
    fit.fit(msgs)
    args = json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "calc.py" and len(args["old_text"]) < 200 and "characters of output left out" in args["old_text"]


def test_the_last_observations_are_cut_when_nothing_else_is_left() -> None:
    msgs = conversation(2, 6000)  # two huge observations, nothing old to elide
    fit = ContextFit(context_tokens=2000, reserve_tokens=200)
    assert fit.fit(msgs) == 2 and fit.estimate(msgs) <= fit.budget
    last = msgs[-1]["content"]
    assert last.startswith("1" * 500) and last.endswith("1" * 100) and "characters of output left out" in last


def test_whole_old_turns_go_and_the_map_last_and_the_task_stays() -> None:
    task = f"Task: fix it\n\n{REPO_MAP_HEADING} (...):\n" + "pkg/mod.py\n" * 300
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": task}, *conversation(6, 500)[2:]]
    fit = ContextFit(context_tokens=700, reserve_tokens=100)
    fit.fit(msgs, attempt=len(LEVELS) - 1)
    assert msgs[1]["content"].startswith("Task: fix it\n\n(The repository map was dropped")
    roles = [m["role"] for m in msgs]
    assert roles[:2] == ["system", "user"] and roles.count("assistant") >= 1
    for i, m in enumerate(msgs):  # every observation still answers the call just before it
        if m["role"] == "tool":
            assert msgs[i - 1]["tool_calls"][0]["id"] == m["tool_call_id"]
    assert fit.estimate(msgs) <= fit.budget * LEVELS[-1]


class CountingServer(FakeServer):
    """A server whose tokens are ``chars_per_token`` characters (not the agent's first guess), which
    refuses a prompt over its context as vLLM does (the message states the context) and reports its
    count in ``usage``; ``GET /models`` states the context only when ``reports_length``."""

    def __init__(self, script: list[str], context: int, chars_per_token: float, reports_length: bool = True) -> None:
        super().__init__(script, max_model_len=context if reports_length else None)
        self.context, self.chars_per_token, self.refusals = context, chars_per_token, 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.content:
            return super().handle(request)
        body = json.loads(request.content)
        self.requests.append((request.method, request.url.path, dict(request.headers), body))
        prompt = int(sum(len(m.get("content") or "") for m in body["messages"]) / self.chars_per_token)
        if prompt + (body.get("max_tokens") or 0) > self.context:
            self.refusals += 1
            return httpx.Response(400, json={"object": "error", "type": "BadRequestError", "message": (
                f"This model's maximum context length is {self.context} tokens. However, you requested "
                f"{prompt + (body.get('max_tokens') or 0)} tokens ({prompt} in the messages).")})
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        text = self.script[min(step, len(self.script) - 1)]
        usage = {"prompt_tokens": prompt, "completion_tokens": 5}
        chunks = [{"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]}, {"choices": [], "usage": usage}]
        sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})


@pytest.mark.parametrize("reports_length", [True, False])
def test_a_job_survives_refusals_from_a_server_that_counts_differently(reports_length: bool) -> None:
    """The server's tokens are two characters (the agent guesses three) and a command prints 3,000
    characters a turn. Knowing the context, the agent measures prompts in the server's count and is
    never refused; not knowing it, its prompts are refused as too long, and each is shrunk to the
    context the refusal states and sent again. Either way the job makes every call."""
    noisy = [answer(f"python3 -c \"print('{c}' * 3000)\"") for c in "abcdefgh"]
    server = CountingServer([*noisy, answer("echo done")], context=2500, chars_per_token=2.0,
                            reports_length=reports_length)
    result = run_jobs([AgentTask("print a lot", None)], server, step_limit=9)
    job = result.results[0].job
    assert job.error is None and job.steps == 9 and job.exit_status == "LimitsExceeded"
    assert job.refused == server.refusals and (server.refusals == 0 if reports_length else server.refusals >= 1)
    assert job.elided >= 3


def test_whatever_a_command_prints_the_observation_is_kept_to_its_share() -> None:
    server = FakeServer([answer("python3 -c \"print('z' * 200000)\""), answer("echo done")], max_model_len=3000)
    result = run_jobs([AgentTask("print a lot", None)], server, step_limit=2, max_tokens=64)
    job = result.results[0].job
    assert job.error is None and job.steps == 2
    observation = server.chat_bodies()[-1]["messages"][-1]["content"]
    assert len(observation) < 3000 and "characters of output left out" in observation


class TerseServer(CountingServer):
    """Refuses an over-long prompt without saying the context (llama.cpp's wording), and GET /models
    does not say it either."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = super().handle(request)
        if response.status_code == 400:
            return httpx.Response(400, json={"error": {"code": 400, "type": "exceed_context_size_error",
                                                       "message": "the request exceeds the available context size"}})
        return response


def test_a_refusal_that_names_no_length_fits_to_the_largest_prompt_taken() -> None:
    noisy = [answer(f"python3 -c \"print('{c}' * 3000)\"") for c in "abcdef"]
    server = TerseServer([*noisy, answer("echo done")], context=2500, chars_per_token=2.0, reports_length=False)
    result = run_jobs([AgentTask("print a lot", None)], server, step_limit=7)
    job = result.results[0].job
    assert job.error is None and job.steps == 7 and job.refused >= 1


@pytest.mark.parametrize(("status", "body", "exceeded", "tokens"), [
    (400, '{"object": "error", "message": "This model\'s maximum context length is 8192 tokens. However, you '
          'requested 9000 tokens"}', True, 8192),
    (400, '{"error": {"message": "prompt (900 tokens) too long", "code": "context_length_exceeded"}}', True, None),
    (400, '{"error": {"type": "exceed_context_size_error", "n_ctx": 4096}}', True, 4096),
    (500, '{"error": {"message": "CUDA out of memory"}}', False, None),
])
def test_a_refusal_says_whether_the_prompt_was_too_long(status: int, body: str, exceeded: bool,
                                                        tokens: int | None) -> None:
    error = ChatError(status, body)
    assert error.context_exceeded is exceeded and error.context_tokens == tokens
    assert str(error).startswith(f"HTTP {status}: ")
