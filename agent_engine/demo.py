"""``make demo``: generate with the embedded default model and print a throughput line."""

from __future__ import annotations

import argparse
import time

from agent_engine.cli_args import engine_config_from_args

DEMO_PROMPTS = [
    "def fib(n):",
    "import os",
    "The agent ran `pytest -q` and saw",
    "<|im_start|>user\nList the files in the repo.<|im_end|>\n<|im_start|>assistant\n",
]


def run_demo(args: argparse.Namespace) -> int:
    from agent_engine.llm import LLM
    from scheduler import SamplingParams

    t0 = time.perf_counter()
    llm = LLM(config=engine_config_from_args(args))
    print(f"loaded {llm.engine.model_name} in {time.perf_counter() - t0:.1f} s "
          f"(KV pool {llm.engine.sched_config.num_blocks - 1} blocks x {llm.engine.sched_config.block_size} tokens)")
    sp = SamplingParams(temperature=0, max_tokens=32)
    outs = llm.generate(DEMO_PROMPTS, sp, use_tqdm=False)
    for o in outs:
        print(f"{o.prompt!r} -> {o.outputs[0].text!r}")
    prompts = [f"Step {i}: the agent reads file_{i}.py and" for i in range(32)]
    t0 = time.perf_counter()
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    dt = time.perf_counter() - t0
    n = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"throughput: {len(prompts)} concurrent requests, {n} generated tokens in {dt:.2f} s = {n / dt:.1f} tok/s")
    return 0
