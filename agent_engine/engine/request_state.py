"""``RequestState``: what the engine keeps of one live request besides the scheduler's ``Request``.

The text decoded so far, the stop strings, the logprobs, and how much of the text the caller has seen.
It turns each step's new tokens into the caller's ``RequestOutput``.

Invariants: ``num_reported_chars <= len(text)``; while the request runs, the reported text never ends
inside what could still grow into a stop string (that tail is held back); once a stop string is found
the text is cut there (kept with ``include_stop``) and the request's finish reason is ``stop``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_engine.engine.detokenizer import IncrementalDetokenizer, find_stop
from agent_engine.engine.outputs import CompletionOutput, RequestMetrics, RequestOutput
from scheduler import Request

__all__ = ["RequestState"]


@dataclass
class RequestState:
    """One live request's text side (see the module docstring)."""

    request: Request
    prompt: str | None
    detokenizer: IncrementalDetokenizer
    stop: tuple[str, ...]
    include_stop: bool
    text: str = ""
    # Characters of ``text`` already reported to the caller (a held-back tail may hide a stop string).
    num_reported_chars: int = 0
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)

    def take(self, new_ids: list[int], finish_reason: str | None, new_logprobs: Sequence[float],
             new_top: Sequence[list[tuple[int, float]]]) -> tuple[str | None, bool]:
        """Decode the new tokens and look for a stop string; ``(finish reason, whether a stop string
        ended the request)``."""
        self.text += self.detokenizer.push(new_ids)
        if finish_reason is not None:
            self.text += self.detokenizer.flush()
        self.logprobs.extend(new_logprobs)
        self.top_logprobs.extend(new_top)
        if not self.stop:
            return finish_reason, False
        # A stop string may straddle deltas: search from where an unreported one could begin.
        start = max(0, self.num_reported_chars - max(len(s) for s in self.stop) + 1)
        idx = find_stop(self.text, self.stop, start)
        if idx is None:
            return finish_reason, False
        stop_str = next(s for s in self.stop if self.text.startswith(s, idx))
        self.text = self.text[: idx + len(stop_str)] if self.include_stop else self.text[:idx]
        return "stop", True

    def output(self, new_ids: list[int], finish_reason: str | None) -> RequestOutput:
        """The caller's output for this step: the text so far (less a held-back tail while running)."""
        req = self.request
        if finish_reason is not None:
            report_upto = len(self.text)
        else:  # hold back a tail that could still grow into a stop string
            hold = max((len(s) - 1 for s in self.stop), default=0)
            report_upto = max(self.num_reported_chars, len(self.text) - hold)
        delta = self.text[self.num_reported_chars : report_upto]
        self.num_reported_chars = report_upto
        sp = req.sampling_params
        return RequestOutput(
            request_id=req.request_id, prompt=self.prompt, prompt_token_ids=req.prompt_token_ids,
            outputs=[CompletionOutput(
                index=0, text=self.text[:report_upto], token_ids=list(req.output_token_ids),
                finish_reason=finish_reason,
                logprobs=list(self.logprobs) if sp.logprobs is not None else None,
                top_logprobs=list(self.top_logprobs) if sp.logprobs else None,
            )],
            finished=finish_reason is not None,
            num_cached_tokens=max(0, req.num_cached_tokens),
            new_token_ids=list(new_ids),
            new_text=delta,
            metrics=RequestMetrics(req.arrival_time, req.first_scheduled_time, req.first_token_time,
                                   req.finished_time),
            job_id=req.job_id,
            hint_source=req.hints.hint_source, tenant=req.hints.tenant,
            pin_hit=req.pin_hit,
            pinned=req.pinned,
        )

    def error_output(self) -> RequestOutput:
        """The final output of a request that failed (finish reason ``error``)."""
        req = self.request
        return RequestOutput(
            request_id=req.request_id, prompt=self.prompt, prompt_token_ids=req.prompt_token_ids,
            outputs=[CompletionOutput(0, self.text, list(req.output_token_ids), "error")], finished=True,
            num_cached_tokens=max(0, req.num_cached_tokens), job_id=req.job_id, tenant=req.hints.tenant)
