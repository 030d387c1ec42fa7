"""Build and cache the embedded default model: a small random Llama with a locally trained tokenizer.

Invariants:
- ``build_default_model`` is a pure function of this file and ``agent_engine.model.tokenizer_corpus``: two
  builds (any machine, any run) write byte-identical files. Weights come from one explicit
  ``torch.Generator`` seeded with ``WEIGHT_SEED`` that fills parameters in sorted-name order; the
  tokenizer is trained on the fixed in-repo corpus; every JSON file is written with sorted keys and no
  library-version fields.
- The folder is an ordinary HF folder (config.json, generation_config.json, model.safetensors,
  tokenizer.json, tokenizer_config.json, special_tokens_map.json) loadable by transformers and vLLM.
- ``default_model_dir`` publishes a build atomically: it builds into a temporary sibling folder and
  renames it into place, so a reader never sees a half-written folder, and two racing processes both
  end up with the same complete folder.
- Any change to the architecture, seeds, init scales, tokenizer settings or corpus must bump
  ``DEFAULT_MODEL_VERSION`` (the cache key).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from agent_engine.json_types import JsonObject
from agent_engine.model.tokenizer_corpus import corpus_texts
from agent_engine.paths import models_dir

DEFAULT_MODEL_VERSION = "default-v1"
DEFAULT_MODEL_NAME = "agent-engine-default"

WEIGHT_SEED = 20240611
VOCAB_SIZE = 4096
EOS_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (EOS_TOKEN, IM_START, IM_END)  # ids 0, 1, 2 in this order

# Init scales: large embedding / lm_head std keeps logits spread out (top-2 gaps far above float
# noise, so greedy decoding is stable across kernels); layer std is big enough that attention and MLP
# outputs depend on context (otherwise greedy decoding becomes a function of the last token only).
EMBED_STD = 1.0
LM_HEAD_STD = 0.5
LAYER_STD = 0.05

REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def model_config_dict() -> JsonObject:
    """The HF ``config.json`` of the default model (a plain dict, no library-version fields)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": LAYER_STD,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": SPECIAL_TOKENS.index(EOS_TOKEN),
        "eos_token_id": SPECIAL_TOKENS.index(IM_END),
        "pad_token_id": SPECIAL_TOKENS.index(EOS_TOKEN),
        "torch_dtype": "float32",
    }


def _write_json(path: Path, obj: JsonObject) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def train_tokenizer() -> Tokenizer:
    """Train the byte-level BPE tokenizer (vocab ``VOCAB_SIZE``, specials first) on the fixed corpus.

    Any UTF-8 string round-trips exactly through encode/decode (ByteLevel pre-tokenizer + decoder,
    no normalizer, no prefix space, no BOS/EOS insertion).
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_texts(), trainer=trainer)
    if tok.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer vocab is {tok.get_vocab_size()}, expected {VOCAB_SIZE}")
    for i, special in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(special) != i:
            raise RuntimeError(f"special token {special!r} has id {tok.token_to_id(special)}, expected {i}")
    return tok


def random_state_dict(config: JsonObject) -> dict[str, torch.Tensor]:
    """Seeded float32 weights for ``config``; parameter names and shapes come from transformers.

    The model skeleton is built on the meta device (no memory, no global RNG use); each parameter is
    then filled from one generator in sorted-name order, so the result depends only on the seed.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(**{k: v for k, v in config.items() if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(hf_config)
    shapes = {name: tuple(p.shape) for name, p in skeleton.named_parameters()}
    gen = torch.Generator(device="cpu").manual_seed(WEIGHT_SEED)
    state: dict[str, torch.Tensor] = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if name.endswith("norm.weight"):
            state[name] = torch.ones(shape, dtype=torch.float32)
            continue
        std = EMBED_STD if name == "model.embed_tokens.weight" else LM_HEAD_STD if name == "lm_head.weight" else LAYER_STD
        state[name] = torch.empty(shape, dtype=torch.float32).normal_(0.0, std, generator=gen)
    return state


def _tokenizer_config() -> JsonObject:
    added = {
        str(i): {
            "content": tok,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, tok in enumerate(SPECIAL_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": EOS_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }


def build_default_model(out_dir: Path) -> Path:
    """Write the default model's HF files into ``out_dir`` (created if needed) and return it.

    Deterministic: the files are byte-identical across builds. Not atomic by itself; use
    ``default_model_dir`` for the cached, atomically published copy.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = model_config_dict()
    tok = train_tokenizer()
    tok.save(str(out_dir / "tokenizer.json"), pretty=True)
    _write_json(out_dir / "tokenizer_config.json", _tokenizer_config())
    _write_json(
        out_dir / "special_tokens_map.json",
        {"additional_special_tokens": [IM_START, IM_END], "eos_token": IM_END, "pad_token": EOS_TOKEN},
    )
    _write_json(out_dir / "config.json", config)
    _write_json(
        out_dir / "generation_config.json",
        {
            "bos_token_id": config["bos_token_id"],
            "eos_token_id": [SPECIAL_TOKENS.index(IM_END), SPECIAL_TOKENS.index(EOS_TOKEN)],
            "pad_token_id": config["pad_token_id"],
            "do_sample": False,
        },
    )
    save_file(random_state_dict(config), str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return out_dir


def is_complete(model_dir: Path) -> bool:
    """True when every required file of the default model is present in ``model_dir``."""
    return all((model_dir / name).is_file() for name in REQUIRED_FILES)


@contextlib.contextmanager
def _build_lock(lock_path: Path) -> Iterator[None]:
    """Advisory inter-process lock (POSIX ``flock``) so racing processes build once; a no-op where
    ``fcntl`` is missing, which stays correct because publishing is an atomic rename anyway."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def default_model_dir() -> Path:
    """Return the cached default model folder, building and publishing it atomically if missing.

    Safe under concurrent calls from several processes: builders serialize on a lock file, each build
    goes to a private temp folder that is renamed into place; a loser of a rename race discards its copy
    and uses the winner's (identical).
    """
    final = models_dir() / DEFAULT_MODEL_VERSION
    if is_complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(final.parent / f".{DEFAULT_MODEL_VERSION}.lock"):
        if not is_complete(final):
            _build_and_publish(final)
    return final


def _build_and_publish(final: Path) -> None:
    if final.exists():  # incomplete leftover from a foreign writer: move it aside, then rebuild
        stale = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL_VERSION}.stale-", dir=final.parent))
        try:
            os.replace(final, stale / "old")
        except OSError:
            pass
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL_VERSION}.tmp-", dir=final.parent))
    try:
        build_default_model(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the published model is world-readable
        try:
            os.rename(tmp, final)
        except OSError:
            if not is_complete(final):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
