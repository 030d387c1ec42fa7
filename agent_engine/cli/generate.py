"""``agent-engine generate "prompt" ...``: offline generation on the engine, printing text and tokens/s."""

from __future__ import annotations

import argparse

from agent_engine.config import EngineConfig

HELP = "offline generation for a few prompts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    EngineConfig.add_arguments(parser)
    parser.add_argument("prompt", nargs="+", help="prompt text(s)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--sampling-seed", type=int, default=None)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from agent_engine.engine.llm import LLM
    from scheduler import SamplingParams

    llm = LLM(config=EngineConfig.from_args(args))
    sp = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.sampling_seed)
    t0 = time.perf_counter()
    outs = llm.generate(args.prompt, sp, use_tqdm=len(args.prompt) > 1)
    dt = time.perf_counter() - t0
    for o in outs:
        print(f"--- {o.prompt!r}\n{o.outputs[0].text!r}  [{o.outputs[0].finish_reason}]")
    n = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"{n} tokens in {dt:.2f} s: {n / dt:.1f} tok/s")
    return 0
