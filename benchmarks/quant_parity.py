"""``bench quant-parity``: greedy output on a GGUF file's quantized weights against the dequantized
reference, on the same chat prompts.

    agent-engine bench quant-parity [--model qwen2.5-coder-1.5b] [--max-tokens 48]

The reference is the same model with ``--gguf-weights float32`` (every weight dequantized to float32:
gguf-py's values); the native engine multiplies by the file's blocks with int8-rounded activations
(``kernels.quant``). Both generate greedily, one engine after the other in this process, with the
top-2 log-probabilities of every token. Per prompt: whether the outputs are identical, the first
position where they differ and the reference's margin there (top-1 minus top-2 log-probability: a
near-tie is where a rounding difference can flip the choice). Prints a table and writes JSON.

Invariant: both engines get identical token ids (checked: each applies the file's chat template with
its own tokenizer), identical sampling settings and one request at a time; only ``gguf_weights``
differs.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Sequence
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.cli import run_standalone

ENGINE_FLAGS = ("num_kv_blocks",)  # EngineConfig's, given to both engines
ENGINE_DEFAULTS = {"num_kv_blocks": 256}  # eight short chats, one at a time
HELP = "greedy tokens on quantized GGUF weights vs the dequantized float32 reference (parity prompts)"
HEADERS = ["prompt", "identical", "first difference", "reference margin there", "tokens"]

# Short coding-assistant chats: the kind of turn the served models see.
PARITY_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number iteratively.",
    "What does `git rebase -i HEAD~3` do? Answer in two sentences.",
    "Fix the bug: def mean(xs): total = sum(xs); return total / len(xs) - 1",
    "Write a shell command that counts the lines of every .py file under src/.",
    "Explain the difference between a list and a tuple in Python.",
    "Write a unit test for a function is_palindrome(s) using unittest.",
    "What is the capital of France?",
    "Convert this loop to a list comprehension: out = []\nfor x in xs:\n    if x > 0:\n        out.append(x * 2)",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``bench quant-parity``."""
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="a .gguf file or known GGUF model name")
    p.add_argument("--max-tokens", type=int, default=48, help="greedy tokens per prompt (default 48)")
    EngineConfig.add_arguments(p, ENGINE_FLAGS, ENGINE_DEFAULTS, title="engine options (both engines)")
    p.add_argument("--json", default="out/quant_parity.json", help="results JSON")


def generate(model: str, gguf_weights: str, max_tokens: int, num_kv_blocks: int) -> list[dict[str, Any]]:
    """Prompt ids, greedy tokens and top-2 log-probabilities per parity prompt, one request at a time."""
    from agent_engine import LLM, SamplingParams

    llm = LLM(model=model, gguf_weights=gguf_weights, num_kv_blocks=num_kv_blocks)
    tokenizer = llm.get_tokenizer()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=2, ignore_eos=True)
    runs = []
    for text in PARITY_PROMPTS:
        ids = list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 tokenize=True, return_dict=True)["input_ids"])
        out = llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)[0].outputs[0]
        runs.append({"prompt_ids": ids, "tokens": list(out.token_ids),
                     "top": [list(t) for t in (out.top_logprobs or [])]})
    del llm
    gc.collect()
    return runs


def compare(reference: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
    """Identical or not, the first differing position and the reference's top-1/top-2 margin there."""
    if reference["prompt_ids"] != native["prompt_ids"]:
        raise ValueError("the two engines tokenized a parity prompt differently")
    ref, nat = reference["tokens"], native["tokens"]
    first = next((i for i, (a, b) in enumerate(zip(ref, nat, strict=False)) if a != b), None)
    margin = None
    if first is not None and first < len(reference["top"]) and len(reference["top"][first]) >= 2:
        (_, lp1), (_, lp2) = sorted(reference["top"][first], key=lambda t: -t[1])[:2]
        margin = lp1 - lp2
    return {"identical": first is None and len(ref) == len(nat), "first_difference": first,
            "margin": margin, "tokens": len(ref)}


def run(args: argparse.Namespace) -> int:
    reference = generate(args.model, "float32", args.max_tokens, args.num_kv_blocks)
    native = generate(args.model, "native", args.max_tokens, args.num_kv_blocks)
    results = [{"prompt": text, **compare(r, n)} for text, r, n in zip(PARITY_PROMPTS, reference, native,
                                                                          strict=True)]
    rows = [[r["prompt"][:40], "yes" if r["identical"] else "no",
             "-" if r["first_difference"] is None else r["first_difference"],
             "-" if r["margin"] is None else f"{r['margin']:.3f}", r["tokens"]] for r in results]
    print_table(HEADERS, rows)
    same = sum(r["identical"] for r in results)
    print(f"{same} of {len(results)} greedy outputs identical to the dequantized reference")
    write_json(args.json, {"machine": machine_info(), "model": args.model, "max_tokens": args.max_tokens,
                           "identical": same, "results": results,
                           "reference": reference, "native": native})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.quant_parity``: the flags and run of ``agent-engine bench quant-parity``."""
    return run_standalone("quant-parity", argv)


if __name__ == "__main__":
    raise SystemExit(main())
