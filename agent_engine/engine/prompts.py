"""Prompts to token ids: text, token ids, or a ``{"prompt": ...}`` / ``{"prompt_token_ids": ...}`` dict.

Invariant: ``tokenize_prompt`` either returns a non-empty list of in-vocabulary ids or raises
``ValueError`` saying what is wrong; it touches only the tokenizer, so any thread may call it (the
server tokenizes on its own thread and hands the engine an ``EngineRequest`` carrying the ids, which
the engine takes as already checked).

A text prompt is measured before it is tokenized: no token spans more than ``longest_token_bytes``
bytes (plus ``TOKEN_BYTES_MARGIN`` for tokenizers whose single-token decode drops a leading space),
and a character is at least a byte, so a text of ``n`` characters has at least ``n / that`` tokens.
Given ``max_len``, a text whose bound already passes it is refused at once, without the seconds a
megabyte-scale tokenization takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PromptType = str | list[int] | dict[str, str | list[int]]
TOKEN_BYTES_MARGIN = 8


def longest_token_bytes(tokenizer: PreTrainedTokenizerBase, vocab_size: int) -> int:
    """The most UTF-8 bytes any single token of ``tokenizer`` decodes to (special tokens included)."""
    texts = tokenizer.batch_decode([[i] for i in range(vocab_size)])
    return max((len(t.encode("utf-8", "surrogatepass")) for t in texts), default=1)


def tokenize_prompt(tokenizer: PreTrainedTokenizerBase, vocab_size: int, prompt: PromptType, max_len: int | None = None,
                    token_bytes: int | None = None) -> tuple[str | None, list[int]]:
    """``(text or None, token ids)`` of ``prompt``; ValueError if it is empty, malformed or out of
    vocabulary, or (given ``max_len`` and ``token_bytes``) a text certain to exceed ``max_len`` tokens."""
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
        if max_len is not None and token_bytes is not None:
            _check_text_bound(prompt, max_len, token_bytes)
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


def _check_text_bound(text: str, max_len: int, token_bytes: int) -> None:
    at_least = len(text) // (token_bytes + TOKEN_BYTES_MARGIN)
    if at_least > max_len:
        raise ValueError(f"prompt ({len(text)} characters, so at least {at_least} tokens) exceeds "
                         f"max_model_len ({max_len})")
