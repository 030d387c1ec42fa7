"""IncrementalDetokenizer and find_stop on the default byte-level tokenizer."""

from __future__ import annotations

import random

import pytest

from agent_engine.engine.detokenizer import (
    REPLACEMENT_CHAR,
    IncrementalDetokenizer,
    backend_decoder,
    find_stop,
    stop_hold_back,
)
from agent_engine.model.default_model import default_model_dir

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def tok():  # noqa: ANN201 - a transformers tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(default_model_dir()))


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map used by the ByteLevel pre-tokenizer."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


_BYTE_TO_CHAR = _bytes_to_unicode()


def _stream(tok, prompt: list[int], out: list[int], skip: bool = True, chunks: list[int] | None = None):
    detok = IncrementalDetokenizer(tok, prompt, skip_special_tokens=skip)
    deltas, i = [], 0
    for size in chunks or [1] * len(out):
        deltas.append(detok.push(out[i : i + size]))
        i += size
    deltas.append(detok.flush())
    return detok, deltas


@pytest.mark.parametrize(
    "text", ["你好，世界！", "😀🚀👩‍💻 done", "a😀b中c", "Ångström → ∞ 🇩🇪🏳️‍🌈", "plain ascii text\n"]
)
def test_multibyte_never_split(tok, text: str) -> None:
    prompt = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    out = tok.encode(text, add_special_tokens=False)
    detok, deltas = _stream(tok, prompt, out)
    assert "".join(deltas) == text == detok.text
    assert all(REPLACEMENT_CHAR not in d for d in deltas)
    assert detok.output_token_ids == out


def test_split_emoji_is_held_back(tok) -> None:
    # One raw byte per token: nothing may be emitted until the 4-byte emoji completes.
    raw = [tok.convert_tokens_to_ids(_BYTE_TO_CHAR[b]) for b in "🚀".encode()]
    assert len(raw) == 4 and tok.decode(raw) == "🚀"
    detok = IncrementalDetokenizer(tok, [])
    assert [detok.push([t]) for t in raw] == ["", "", "", "🚀"]
    assert detok.flush() == ""


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("skip", [True, False])
def test_random_streams_match_full_decode(tok, seed: int, skip: bool) -> None:
    rng = random.Random(seed)
    vocab = len(tok)
    prompt = [rng.randrange(vocab) for _ in range(rng.randrange(0, 12))]
    out = [rng.randrange(vocab) for _ in range(300)]
    # Bias toward special tokens and raw high bytes (partial UTF-8 characters).
    high_bytes = [tok.convert_tokens_to_ids(_BYTE_TO_CHAR[b]) for b in range(0x80, 0x100)]
    for i in range(0, len(out), 7):
        out[i] = rng.choice(high_bytes + [0, 1, 2])
    chunks, total = [], 0
    while total < len(out):
        chunks.append(min(rng.randrange(1, 5), len(out) - total))
        total += chunks[-1]
    detok, deltas = _stream(tok, prompt, out, skip=skip, chunks=chunks)
    expected = tok.decode(out, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
    assert "".join(deltas) == expected


def test_window_stays_small(tok) -> None:
    out = tok.encode("The scheduler decides which requests run. " * 50, add_special_tokens=False)
    detok = IncrementalDetokenizer(tok, [])
    for t in out:
        detok.push([t])
        assert len(detok._ids) - detok._prefix_offset <= 4
    assert detok.flush() == ""


def test_round_trip_of_encoded_text(tok) -> None:
    text = "def main():\n    print('héllo 世界 🎉')\n<|im_end|>"
    out = tok.encode(text, add_special_tokens=False)
    _, deltas = _stream(tok, [], out, skip=False)
    assert "".join(deltas) == text
    _, deltas = _stream(tok, [], out, skip=True)
    assert "".join(deltas) == text.replace("<|im_end|>", "")


def test_push_after_flush_fails(tok) -> None:
    detok = IncrementalDetokenizer(tok, [])
    detok.flush()
    with pytest.raises(RuntimeError):
        detok.push([5])


def test_find_stop_basics() -> None:
    assert find_stop("hello world", ["wor", "o"], 0) == 4
    assert find_stop("hello world", ["wor", "o"], 5) == 6
    assert find_stop("hello world", ["wor", "o"], 7) == 7
    assert find_stop("hello world", ["xyz"], 0) is None
    assert find_stop("hello", ["", "l"], 0) == 2
    assert find_stop("abc", [], 0) is None
    assert stop_hold_back(["STOP", "ab"]) == 3 and stop_hold_back([]) == 0


def test_stop_string_straddling_deltas(tok) -> None:
    stop = ["</tool_call>", "\nObservation:"]
    text = "Thought: run it\n<tool_call>{\"name\": \"bash\"}</tool_call> trailing text"
    out = tok.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tok, [])
    found = None
    for t in out:
        before = len(detok.text)
        delta = detok.push([t])
        if not delta:
            continue
        found = find_stop(detok.text, stop, max(0, before - stop_hold_back(stop)))
        if found is not None:
            assert found < before  # the stop string began in an earlier delta
            break
    assert found == text.index("</tool_call>")
    assert detok.text[:found] == 'Thought: run it\n<tool_call>{"name": "bash"}'


@pytest.mark.parametrize("skip", [True, False])
def test_backend_decoder_is_the_tokenizers_decode(tok, skip: bool) -> None:
    """The direct backend call equals ``decode(..., clean_up_tokenization_spaces=False)`` on ids with
    special tokens, split characters and spaces; a tokenizer without a backend keeps its own decode."""
    rng = random.Random(3)
    fast = backend_decoder(tok, skip)
    for _ in range(200):
        ids = [rng.randrange(0, len(tok)) for _ in range(rng.randint(0, 12))]
        assert fast(ids) == tok.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)

    class Plain:
        def decode(self, ids: list[int], skip_special_tokens: bool, clean_up_tokenization_spaces: bool) -> str:
            return f"{ids}:{skip_special_tokens}:{clean_up_tokenization_spaces}"

    assert backend_decoder(Plain(), skip)([1, 2]) == f"[1, 2]:{skip}:False"
