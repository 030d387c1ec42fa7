"""Offline batch generation: ``LLM(...).generate(prompts, SamplingParams(...))`` as in vLLM."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from agent_engine.config import EngineConfig
from agent_engine.engine.llm_engine import LLMEngine, PromptType
from agent_engine.engine.outputs import RequestOutput
from scheduler import SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class LLM:
    """An engine for offline use. Keyword arguments are the engine options (same names as CLI flags).

    ``LLM()`` loads the embedded default model; ``LLM(model="/path/to/hf-folder")`` a local checkpoint.
    """

    def __init__(self, model: str | None = None, *, config: EngineConfig | None = None,
                 **engine_kwargs: object) -> None:
        if config is not None and (model is not None or engine_kwargs):
            raise ValueError("pass either config= or engine options, not both")
        self.engine = LLMEngine(config or EngineConfig.from_kwargs(model=model, **engine_kwargs))
        self._ids = itertools.count()

    def get_tokenizer(self) -> PreTrainedTokenizerBase:
        return self.engine.tokenizer

    def generate(
        self,
        prompts: PromptType | Sequence[PromptType],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        """Generate for every prompt; results come back in input order.

        A prompt is a string, a list of token ids, or ``{"prompt_token_ids": [...]}``. If any prompt
        is invalid, ValueError is raised and nothing from this call stays queued.
        """
        if isinstance(prompts, (str, dict)) or (
            isinstance(prompts, list) and prompts and isinstance(prompts[0], int)
        ):
            prompts = [prompts]  # type: ignore[list-item]
        if not isinstance(prompts, (list, tuple)):
            raise ValueError(f"prompts must be a prompt or a list of prompts, got {type(prompts).__name__}")
        prompts = list(prompts)
        if sampling_params is None:
            params_list = [SamplingParams()] * len(prompts)
        elif isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params] * len(prompts)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompts):
                raise ValueError("need one SamplingParams per prompt")
        ids = [f"gen-{next(self._ids)}" for _ in prompts]
        try:
            for rid, p, sp in zip(ids, prompts, params_list, strict=True):
                self.engine.add_request(self.engine.make_request(rid, p, sp))
        except Exception:
            self.engine.abort(ids)
            raise
        results: dict[str, RequestOutput] = {}
        bar = tqdm(total=len(ids), desc="generate", disable=not use_tqdm, unit="req")
        try:
            while len(results) < len(ids) and self.engine.has_unfinished_requests():
                for out in self.engine.step():
                    if out.finished:
                        results[out.request_id] = out
                        bar.update(1)
        except BaseException:
            self.engine.abort(ids)
            raise
        finally:
            bar.close()
        return [results[i] for i in ids]
