"""Prompts to token ids: text, token ids, or a ``{"prompt": ...}`` / ``{"prompt_token_ids": ...}`` dict.

Invariant: ``tokenize_prompt`` either returns a non-empty list of in-vocabulary ids or raises
``ValueError`` saying what is wrong; it touches only the tokenizer, so any thread may call it.
"""

from __future__ import annotations

from typing import Any

PromptType = str | list[int] | dict[str, Any]


def tokenize_prompt(tokenizer: Any, vocab_size: int, prompt: PromptType) -> tuple[str | None, list[int]]:
    """``(text or None, token ids)`` of ``prompt``; ValueError if it is empty, malformed or out of vocabulary."""
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
