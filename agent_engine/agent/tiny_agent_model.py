"""A tiny Llama that really acts as a shell agent: trained in seconds on scripted agent transcripts.

Used by the end-to-end agent test (and handy for demos): it answers each step of a scripted task with
the next command of its script, in the loop's exact format (one ```bash block), whatever the
observations say. It has the embedded default model's tokenizer and chat template.

Invariants:
- Transcripts are rendered with ``agent_engine.agent.text_interface``'s own prompt functions and the tokenizer's
  chat template, so training prompts are token-for-token what the loop sends to the server.
- The loss covers only assistant tokens (the answer and its ``<|im_end|>``), never the prompt; each
  answer's first command token (the step decision) weighs ``DECISION_WEIGHT`` times more.
- Training stops early once greedy decoding is exact on held-out random transcripts with a logit margin
  of at least ``target_margin``; ``TrainReport.margin`` is that margin (<= 0 means it never got there).
- Observations are random (file lists, numbers, words, empty output, non-zero exit codes), so the next
  command depends only on the task and on how many commands came before.
- ``build_tiny_agent_model(dir, seed)`` is deterministic for a seed on one machine (explicit seeds,
  forked global RNG; it does not disturb the caller's RNG state) and writes an ordinary HF folder:
  config.json, generation_config.json, model.safetensors and the default model's tokenizer files.
"""

from __future__ import annotations

import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agent_engine.agent.text_interface import OBSERVATION_TEMPLATE, SUBMIT_COMMAND, initial_messages

__all__ = [
    "SCRIPTS",
    "AgentScript",
    "TrainReport",
    "assistant_answer",
    "build_tiny_agent_model",
    "random_transcript",
    "tiny_config",
]

DECISION_WEIGHT = 5
_FENCE_TOKENS = 3  # "```", "bash", "\n" open every answer
EVAL_FROM = 60  # first step at which the held-out margin is checked
EVAL_EVERY = 10
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
)


@dataclass(frozen=True)
class AgentScript:
    """A task and the commands the trained model issues for it, one per step (the last one submits)."""

    task: str
    commands: tuple[str, ...]


SCRIPTS: tuple[AgentScript, ...] = (
    AgentScript("Count the python files in this repository.",
                ("ls", "find . -name '*.py' | wc -l", SUBMIT_COMMAND)),
)


@dataclass(frozen=True)
class TrainReport:
    """How a build went: steps, final loss (mean of the last 10 steps), held-out greedy margin, seconds."""

    steps: int
    final_loss: float
    margin: float
    seconds: float


def assistant_answer(command: str) -> str:
    """The assistant message that issues ``command`` in the loop's format."""
    return f"```bash\n{command}\n```"


_WORDS = ("alpha", "beta", "src", "test", "main", "util", "data", "core", "io", "api", "docs", "setup",
          "error", "warning", "total", "found", "no", "such", "file", "ok", "done", "lib", "x", "y")
_UNITS = ("", "", "K", "M", "\t.")
_EXTS = (".py", ".py", ".md", ".txt", ".toml", ".cfg", "", "/")


def _random_output(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:  # a file listing
        names = {rng.choice(_WORDS) + rng.choice(("", "_", "2")) + rng.choice(_EXTS)
                 for _ in range(rng.randrange(1, 9))}
        return "".join(f"{n}\n" for n in sorted(names))
    if kind == 1:  # a count or a size
        return str(rng.randrange(0, 1000)) + rng.choice(_UNITS) + "\n"
    if kind == 2:  # free text
        return "".join(" ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 8))) + "\n"
                       for _ in range(rng.randrange(1, 4)))
    if kind == 3:
        return ""
    return f"./{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py\n" * rng.randrange(1, 4)


def random_transcript(script: AgentScript, rng: random.Random) -> list[dict[str, str]]:
    """The full conversation of ``script`` with random observations between the commands."""
    messages = initial_messages(script.task)
    for i, command in enumerate(script.commands):
        messages.append({"role": "assistant", "content": assistant_answer(command)})
        if i + 1 < len(script.commands):
            code = 0 if rng.random() < 0.8 else rng.choice((1, 2, 127))
            observation = OBSERVATION_TEMPLATE.format(exit_code=code, output=_random_output(rng))
            messages.append({"role": "user", "content": observation})
    return messages


def encode(tokenizer: Any, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """Token ids of the rendered conversation and a loss weight per token: 0 outside assistant answers,
    1 on answer tokens and the end token, ``DECISION_WEIGHT`` on each answer's first command token (the
    one that says which step the agent is at: the hard, rare signal in these transcripts)."""
    ids: list[int] = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    mask = [0] * len(ids)
    for k, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(messages[:k], tokenize=True, add_generation_prompt=True,
                                               return_dict=True)["input_ids"]
        upto = tokenizer.apply_chat_template(messages[:k + 1], tokenize=True, return_dict=True)["input_ids"]
        if ids[:len(prompt)] != prompt or ids[:len(upto)] != upto:
            raise RuntimeError("chat template renders are not prefix-stable; cannot mask assistant tokens")
        for p in range(len(prompt), len(upto) - 1):  # the answer and <|im_end|>, not the trailing newline
            mask[p] = 1
        mask[len(prompt) + _FENCE_TOKENS] = DECISION_WEIGHT
    return ids, mask


def tiny_config(vocab_size: int, eos_token_id: int, pad_token_id: int) -> dict[str, Any]:
    """The tiny Llama's config (2 layers, hidden 128)."""
    return {
        "vocab_size": vocab_size, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu",
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": pad_token_id, "eos_token_id": eos_token_id,
        "pad_token_id": pad_token_id, "initializer_range": 0.02,
    }


def _batch(samples: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    weights = torch.zeros((len(samples), width), dtype=torch.float32)
    for row, (s_ids, s_weights) in enumerate(samples):
        ids[row, :len(s_ids)] = torch.tensor(s_ids)
        weights[row, :len(s_weights)] = torch.tensor(s_weights, dtype=torch.float32)
    return ids, weights


def _loss(model: Any, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted cross-entropy on assistant tokens only (position p predicts token p+1)."""
    hidden = model.model(input_ids=ids).last_hidden_state
    w = weights[:, 1:]
    sel = w > 0
    logits = model.lm_head(hidden[:, :-1][sel])
    per_token = torch.nn.functional.cross_entropy(logits, ids[:, 1:][sel], reduction="none")
    return (per_token * w[sel]).sum() / w[sel].sum()


@torch.no_grad()
def greedy_margin(model: Any, ids: torch.Tensor, weights: torch.Tensor) -> float:
    """Smallest (correct logit - best other logit) over all assistant tokens: > 0 iff greedy is exact."""
    was_training = model.training
    model.eval()
    sel = weights[:, 1:] > 0
    logits = model(input_ids=ids).logits[:, :-1][sel]
    target = ids[:, 1:][sel]
    correct = logits.gather(1, target[:, None])[:, 0]
    logits.scatter_(1, target[:, None], float("-inf"))
    model.train(was_training)
    return float((correct - logits.max(1).values).min())


def _train(config: Any, pool: list[tuple[list[int], list[int]]], held: tuple[torch.Tensor, torch.Tensor],
           rng: random.Random, pad: int, *, seed: int, max_steps: int, batch_size: int, lr: float,
           target_margin: float, losses: list[float]) -> tuple[Any, int, float]:
    """AdamW, warmup then cosine decay; stops early once the held-out greedy margin reaches the target.

    Returns (model, steps run, last held-out margin).
    """
    from transformers import LlamaForCausalLM

    warmup = 10

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, max_steps - warmup)))

    margin = float("-inf")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        for step in range(1, max_steps + 1):
            loss = _loss(model, *_batch(rng.sample(pool, batch_size), pad))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if step >= EVAL_FROM and step % EVAL_EVERY == 0:
                margin = greedy_margin(model, *held)
                if margin >= target_margin:
                    return model, step, margin
    return model, max_steps, margin


def build_tiny_agent_model(out_dir: str | Path, *, scripts: tuple[AgentScript, ...] = SCRIPTS, seed: int = 0,
                           max_steps: int = 400, batch_size: int = 8, lr: float = 1e-2, pool_size: int = 512,
                           held_out: int = 32, target_margin: float = 2.0, num_threads: int = 1,
                           tokenizer_dir: str | Path | None = None) -> TrainReport:
    """Train the tiny agent model on ``scripts``; save it as an HF folder in ``out_dir`` (created if needed).

    Training stops once every assistant token of ``held_out`` fresh random transcripts is the greedy
    choice by at least ``target_margin`` logits (robust to kernel-level float differences in the
    server), else after ``max_steps``; ``TrainReport.margin`` says which (``> 0``: greedy is exact). One
    torch thread by default: tiny ops are dominated by thread synchronisation, which collapses when the
    cores are shared with other processes (the caller's thread setting is restored afterwards).
    """
    from transformers import AutoTokenizer, LlamaConfig

    from agent_engine.model.default_model import default_model_dir

    t_start = time.perf_counter()
    src = Path(tokenizer_dir) if tokenizer_dir is not None else default_model_dir()
    tok = AutoTokenizer.from_pretrained(str(src))
    rng = random.Random(seed)
    pool = [encode(tok, random_transcript(scripts[i % len(scripts)], rng)) for i in range(pool_size)]
    held_rng = random.Random(seed + 1_000_003)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    held = _batch([encode(tok, random_transcript(scripts[i % len(scripts)], held_rng))
                   for i in range(held_out)], pad)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    config = LlamaConfig(**tiny_config(len(tok), eos, pad))
    losses: list[float] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        model, steps, margin = _train(config, pool, held, rng, pad, seed=seed, max_steps=max_steps,
                                      batch_size=batch_size, lr=lr, target_margin=target_margin,
                                      losses=losses)
    finally:
        torch.set_num_threads(threads)
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    tail = losses[-10:]
    return TrainReport(steps, sum(tail) / len(tail), margin, time.perf_counter() - t_start)
