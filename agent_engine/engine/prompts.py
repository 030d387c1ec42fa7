"""Prompts to token ids: text, token ids, or a ``{"prompt": ...}`` / ``{"prompt_token_ids": ...}`` dict.

Invariant: ``tokenize_prompt`` either returns a non-empty list of in-vocabulary ids or raises
``ValueError`` saying what is wrong; it touches only the tokenizer, so any thread may call it (the
server tokenizes on its own thread and hands the engine a ``TokenizedPrompt``, which the engine takes
as already checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenizedPrompt:
    """A prompt already tokenized and checked by ``tokenize_prompt`` (its text, if it had one)."""

    text: str | None
    token_ids: list[int]


PromptType = str | list[int] | dict[str, Any] | TokenizedPrompt


def tokenize_prompt(tokenizer: Any, vocab_size: int, prompt: PromptType) -> tuple[str | None, list[int]]:
    """``(text or None, token ids)`` of ``prompt``; ValueError if it is empty, malformed or out of vocabulary."""
    if isinstance(prompt, TokenizedPrompt):
        return prompt.text, prompt.token_ids
    if isinstance(prompt, dict):
        if "prompt_token_ids" in prompt:
            prompt = prompt["prompt_token_ids"]
        elif "prompt" in prompt:
            prompt = prompt["prompt"]
        else:
            raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt must not be empty")
        return prompt, list(tokenizer(prompt)["input_ids"])
    if isinstance(prompt, (list, tuple)):
        ids = list(prompt)
        if not ids:
            raise ValueError("prompt must not be empty")
        for t in ids:
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab_size:
                raise ValueError(f"token id {t!r} is out of the vocabulary [0, {vocab_size})")
        return None, ids
    raise ValueError(f"prompt must be a string, a list of token ids or a dict, got {type(prompt).__name__}")
