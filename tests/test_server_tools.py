"""Tools in the OpenAI chat API without a model: rendering (the embedded default model's tokenizer and a
tool-aware template), request validation (400s), tool_calls in plain and streamed responses (a scripted
engine), and the estimator seeing the calls the API returns."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from sched_helpers import make_request
from server_fixtures import FakeEngine, ThreadServer, assert_error, post_api, start_thread_server

from agent_engine.engine.job_hooks import JobHooks
from agent_engine.engine.turn_reader import DecodedTurn
from agent_engine.server import AsyncEngine
from agent_engine.server.openai_schema import ChatMessage
from agent_engine.server.tools import NO_TOOLS, ToolChoice, make_tool_parser, render_chat_prompt
from agent_engine.server.tools.plan import ToolPlan
from estimator import Estimator, EstimatorConfig
from scheduler import JobTable
from scheduler.clock import FakeClock
from scheduler.turn_output import TurnOutput

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
USER = [{"role": "user", "content": "Weather in Paris?"}]


class ScriptedEngine(FakeEngine):
    """``FakeEngine`` whose every request answers ``script``, ``chunk`` characters a step; it keeps the
    prompts it was given."""

    def __init__(self) -> None:
        super().__init__(max_model_len=100_000)
        self.script = ""
        self.chunk = 3
        self.prompts: list[str] = []

    def _advance(self, r: Any, now: float) -> Any:
        if not r.tokens:
            self.prompts.append(r.prompt)
        piece = self.script[len(r.text): len(r.text) + self.chunk]
        r.text += piece
        r.tokens.append(1)
        done = len(r.text) >= len(self.script)
        finish = "stop" if done else ("length" if len(r.tokens) >= r.params.max_tokens else None)
        if finish:
            del self.reqs[r.request_id]
        return self._output(r, [1], piece, finish, now)


@pytest.fixture(scope="module")
def srv() -> Iterator[ThreadServer]:
    server = start_thread_server(AsyncEngine(ScriptedEngine()))
    yield server
    server.stop()


def chat(srv: ThreadServer, script: str, **body: Any) -> tuple[dict[str, Any], str]:
    srv.engine.script = script
    r = post_api(srv, "/v1/chat/completions", {"messages": USER, "tools": TOOLS, **body})
    assert r.status_code == 200, r.text
    return r.json(), srv.engine.prompts[-1]


def stream_chat(srv: ThreadServer, script: str, **body: Any) -> list[dict[str, Any]]:
    srv.engine.script = script
    payload = {"messages": USER, "tools": TOOLS, "stream": True, **body}
    with httpx.stream("POST", srv.base_url + "/v1/chat/completions", json=payload, timeout=30) as r:
        assert r.status_code == 200
        lines = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


def joined(chunks: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str | None]:
    """Content, tool calls (merged by index, as clients do) and the finish reason of a stream."""
    content, calls, finish = "", {}, None
    for ch in chunks:
        choice = ch["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for entry in delta.get("tool_calls") or []:
            call = calls.setdefault(entry["index"], {"function": {"arguments": ""}})
            if "id" in entry:
                assert "name" in entry["function"] and "id" not in call  # id and name come first, once
                call.update(id=entry["id"], type=entry["type"])
                call["function"]["name"] = entry["function"]["name"]
            call["function"]["arguments"] += entry["function"].get("arguments", "")
        finish = choice["finish_reason"] or finish
    return content, [calls[i] for i in sorted(calls)], finish


def test_tool_call_in_a_plain_response(srv: ThreadServer) -> None:
    body, prompt = chat(srv, "Checking.\n" + CALL)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["content"] == "Checking." and len(msg["tool_calls"]) == 1
    call = msg["tool_calls"][0]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"]) and call["type"] == "function"
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert "<tools>" in prompt and '"name": "get_weather"' in prompt and "<tool_call>" in prompt


def test_tool_call_streamed_equals_plain(srv: ThreadServer) -> None:
    for chunk in (1, 3, 50):
        srv.engine.chunk = chunk
        content, calls, finish = joined(stream_chat(srv, "Checking.\n" + CALL + "\n" + CALL))
        assert content == "Checking." and finish == "tool_calls"
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
            [("get_weather", {"city": "Paris"})] * 2
        assert calls[0]["id"] != calls[1]["id"]
    srv.engine.chunk = 3


def test_text_without_calls_and_malformed_calls(srv: ThreadServer) -> None:
    body, _ = chat(srv, "It is sunny.")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "It is sunny."}
    assert body["choices"][0]["finish_reason"] == "stop"
    bad = '<tool_call>{"name": "get_weather", "arguments": {</tool_call>'
    body, _ = chat(srv, bad)
    assert body["choices"][0]["message"]["content"] == bad and "tool_calls" not in body["choices"][0]["message"]
    content, calls, finish = joined(stream_chat(srv, bad))
    assert (content, calls, finish) == (bad, [], "stop")


def test_without_tools_the_text_is_untouched(srv: ThreadServer) -> None:
    srv.engine.script = "  " + CALL
    r = post_api(srv, "/v1/chat/completions", {"messages": USER})
    assert r.json()["choices"][0]["message"]["content"] == "  " + CALL
    assert srv.engine.prompts[-1] == "user:Weather in Paris?;assistant:"


def test_tool_choice_none_renders_tools_but_does_not_parse(srv: ThreadServer) -> None:
    body, prompt = chat(srv, CALL, tool_choice="none")
    assert body["choices"][0]["message"]["content"] == CALL and body["choices"][0]["finish_reason"] == "stop"
    assert "<tools>" in prompt


def test_named_tool_choice_forces_the_call_opening(srv: ThreadServer) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    body, prompt = chat(srv, '{"city": "Rome"}}\n</tool_call>', tool_choice=named, parallel_tool_calls=False)
    assert prompt.endswith('<tool_call>\n{"name": "get_weather", "arguments": ')
    call = body["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call == {"name": "get_weather", "arguments": '{"city": "Rome"}'}
    content, calls, finish = joined(stream_chat(srv, '{"city": "Rome"}}\n</tool_call>', tool_choice=named))
    assert content == "" and finish == "tool_calls" and calls[0]["function"] == call


def test_the_engine_gets_the_output_reader(srv: ThreadServer) -> None:
    named = {"type": "function", "function": {"name": "bash"}}
    body, _ = chat(srv, '{"command": "ls"}}</tool_call>', tool_choice=named)
    rid, reader = srv.engine.tool_readers[-1]  # carried on the request's EngineRequest
    assert rid == body["id"]
    assert [c["function"] for c in reader('{"command": "ls"}}')] == [{"name": "bash", "arguments": '{"command": "ls"}'}]
    n = len(srv.engine.tool_readers)
    chat(srv, CALL, tool_choice="none")
    assert len(srv.engine.tool_readers) == n  # not read for calls: no reader travels


def test_multi_turn_conversation_renders_calls_and_results(srv: ThreadServer) -> None:
    srv.engine.script = "Sunny."
    messages = USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "22C"}]}]
    r = post_api(srv, "/v1/chat/completions", {"messages": messages, "tools": TOOLS})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Sunny."
    prompt = srv.engine.prompts[-1]
    assert 'assistant:<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>;' in prompt
    assert "user:<tool_response>\n22C\n</tool_response>;assistant:" in prompt


BAD_REQUESTS = [
    ({"tools": [{"type": "web_search"}]}, "tools.0", "web_search"),
    ({"tools": [{"type": "function", "function": {"name": "my tool"}}]}, "tools.0.function.name", "1-64"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools.0.function.parameters",
     "dictionary"),
    ({"tools": TOOLS + TOOLS[:1]}, "tools", "unique"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "rm"}}}, "tool_choice", "not in tools"),
    ({"tool_choice": "required"}, "tool_choice", "needs tools"),
    ({"tools": TOOLS, "tool_choice": "any"}, "tool_choice", "must be one of"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "boolean"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", "json_schema"),
    ({"response_format": {"type": "json_schema"}}, None, "needs a json_schema"),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a+"}, None, "only one output format"),
    ({"structured_outputs": {"regex": "a+", "choice": ["a"]}}, None, "exactly one of"),
    ({"structured_outputs": {"pattern": "a+"}}, "structured_outputs.pattern", "not permitted"),
    ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format", "cannot be combined"),
    ({"functions": [{"name": "f"}]}, "functions", "use tools"),
    ({"logit_bias": {"1": 5}}, "logit_bias", "not supported"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages",
     "image_url"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0", "tool_call_id"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, "messages.0", "assistant"),
    ({"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "custom", "function": {"name": "f"}}]}]}, "messages.0.tool_calls.0.type", "custom"),
]


@pytest.mark.parametrize("body,param,message", BAD_REQUESTS)
def test_what_the_server_cannot_honour_is_a_400(srv: ThreadServer, body: dict[str, Any], param: str,
                                                message: str) -> None:
    n = len(srv.engine.prompts)
    r = post_api(srv, "/v1/chat/completions", {"messages": USER, **body})
    err = assert_error(r, 400)
    assert err["param"] == param and message in err["message"], err
    assert len(srv.engine.prompts) == n  # nothing ran


# ---- rendering with real templates ---------------------------------------------------------------


@pytest.fixture(scope="module")
def default_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from agent_engine.model.default_model import default_model_dir

    return AutoTokenizer.from_pretrained(str(default_model_dir()))


def test_plain_chat_renders_as_before(default_tokenizer: Any) -> None:
    msgs = [{"role": "system", "content": "Be brief."}] + USER
    assert render_chat_prompt(default_tokenizer, msgs, None, NO_TOOLS) == \
        default_tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)


def test_conversation_round_trips_through_the_default_template(default_tokenizer: Any) -> None:
    calls = [{"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls -l"}'}},
             {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]
    messages = [ChatMessage(**m).as_template_dict() for m in [
        {"role": "system", "content": "Be brief."}, *USER,
        {"role": "assistant", "content": "Two calls.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_a", "content": "file.txt"},
        {"role": "tool", "tool_call_id": "call_b", "content": "cold"}]]
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == {"command": "ls -l"}  # a mapping
    choice = ToolChoice("named", "bash")
    prompt = render_chat_prompt(default_tokenizer, messages, TOOLS, choice)
    system = prompt.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nBe brief.\n\n# Tools") and '"name": "bash"' in system
    assistant = prompt.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    parsed = make_tool_parser(None, default_tokenizer).parse(assistant)
    assert parsed.content == "Two calls."
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == \
        [("bash", {"command": "ls -l"}), ("get_weather", {"city": "Oslo"})]
    assert "<|im_start|>user\n<tool_response>\nfile.txt\n</tool_response>\n<tool_response>\ncold\n" in prompt
    assert prompt.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": ')
    assert len(default_tokenizer(prompt)["input_ids"]) > 0


def test_a_tool_aware_template_renders_tools_itself() -> None:
    class ToolTemplateTokenizer:
        chat_template = "{% for t in tools %}{{ t }}{% endfor %}<tool_call>"

        def apply_chat_template(self, messages: list[dict[str, Any]], **kw: Any) -> str:
            self.seen = (messages, kw)
            return "PROMPT"

    tok = ToolTemplateTokenizer()
    msgs = [ChatMessage(role="assistant", content=None, tool_calls=[
        {"id": "c", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]).as_template_dict()]
    out = render_chat_prompt(tok, msgs, TOOLS, ToolChoice("required"))
    messages, kw = tok.seen
    assert out == "PROMPT<tool_call>\n" and kw["tools"] == TOOLS and kw["add_generation_prompt"]
    assert messages[0]["content"] == "" and messages[0]["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}


# ---- the estimator sees the calls ------------------------------------------------------------------


class _Decoder:
    """A tokenizer whose every output decodes to ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def decode(self, token_ids: object, skip_special_tokens: bool = True) -> str:
        return self.text


@pytest.mark.parametrize("choice,family,output,tool", [
    # The opening of a forced call is in the prompt, not in the output.
    (ToolChoice("named", "get_weather"), None, '{"city": "Paris"}}\n</tool_call>', "get_weather"),
    # A format the estimator's own text parser does not read.
    (ToolChoice("auto"), "llama3_json", '{"name": "bash", "parameters": {"command": "pytest -x"}}', "bash:pytest"),
])
def test_estimator_names_the_tool_the_api_returned(choice: ToolChoice, family: str | None, output: str,
                                                   tool: str) -> None:
    clock = FakeClock(0.0)
    hooks, table = JobHooks(Estimator(EstimatorConfig(), clock=clock), clock), JobTable()
    hooks.keep_jobs_in(table)
    table.listen(hooks)
    est = hooks.estimator
    plan = ToolPlan(TOOLS, choice, family)
    plan.render(FakeEngine().tokenizer, USER)
    reader = plan.output_reader()
    assert reader is not None
    for rid, with_reader in (("r1", True), ("r2", False)):
        job = f"job-{rid}"
        turn = make_request(rid, [1, 2], job_id=job, t=1.0)
        turn.output_reader = DecodedTurn(_Decoder(output), reader if with_reader else None)
        table.arrive(turn, 1.0)
        table.end_turn(turn, 2.0)  # the turn's end carries its output on the request
        table.arrive(make_request(f"{rid}-next", [1, 2, 3], job_id=job, t=5.0), 5.0)  # its tool's duration
    assert est.history.count(tool) == 1  # only the turn that carried the API's reader


def test_a_turn_reader_whose_tool_reader_fails_reads_the_text_without_calls() -> None:
    def broken(text: str) -> list[dict[str, object]]:
        raise RuntimeError("parser bug")

    assert DecodedTurn(_Decoder("hi"), broken)([1]) == TurnOutput("hi", None)
    assert DecodedTurn(_Decoder("hi"))([1]) == TurnOutput("hi", None)
    assert DecodedTurn(_Decoder("x"), lambda text: [{"n": text}])([1]) == TurnOutput("x", [{"n": "x"}])


def test_tool_call_parser_flag_and_config() -> None:
    import argparse

    from agent_engine.server import ServerConfig
    from agent_engine.server.serve import add_arguments
    from agent_engine.server.tools.plan import configured_family

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--tool-call-parser", "pythonic", "--enable-auto-tool-choice"])
    config = ServerConfig.from_args(args)
    assert config.tool_call_parser == "pythonic" and configured_family(SimpleNamespace(server_config=config)) == "pythonic"
    assert ServerConfig.from_args(parser.parse_args([])).tool_call_parser == "auto"
    assert ServerConfig(tool_call_parser="llama3-json").tool_call_parser == "llama3_json"
    assert configured_family(SimpleNamespace()) is None
    with pytest.raises(ValueError, match="known: auto, hermes"):
        ServerConfig(tool_call_parser="xml")
    with pytest.raises(SystemExit):
        parser.parse_args(["--tool-call-parser", "xml"])
