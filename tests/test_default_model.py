"""The embedded default model: deterministic bytes, atomic cache publishing, tokenizer round trips,
chat template, and loading through plain transformers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from agent_engine.model import default_model as dm
from agent_engine.model.tokenizer_corpus import corpus_texts
from agent_engine.paths import ENV_CACHE, models_dir

pytestmark = pytest.mark.core


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One build published through the cache (env-redirected), one built directly elsewhere."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_CACHE, str(cache))
        cached = dm.default_model_dir()
        assert cached == cache / "models" / dm.DEFAULT_MODEL_VERSION
        assert dm.default_model_dir() == cached  # second call reuses the folder
    direct = dm.build_default_model(tmp_path_factory.mktemp("direct") / "m")
    return cached, direct


def test_builds_are_byte_identical(two_builds: tuple[Path, Path]) -> None:
    a, b = two_builds
    assert sorted(p.name for p in a.iterdir()) == sorted(dm.REQUIRED_FILES)
    for name in dm.REQUIRED_FILES:
        assert _sha(a / name) == _sha(b / name), name


def test_cache_publish_leaves_no_temp_dirs(two_builds: tuple[Path, Path]) -> None:
    cached, _ = two_builds
    assert sorted(p.name for p in cached.parent.iterdir()) == [f".{dm.DEFAULT_MODEL_VERSION}.lock", dm.DEFAULT_MODEL_VERSION]
    assert oct(cached.stat().st_mode & 0o777) == oct(0o755)


def test_losing_a_build_race_uses_the_winner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CACHE, str(tmp_path))
    final = models_dir() / dm.DEFAULT_MODEL_VERSION

    def fake_build(out_dir: Path) -> Path:
        for name in dm.REQUIRED_FILES:
            (out_dir / name).write_text("mine")
        final.mkdir(parents=True)  # another process publishes first
        for name in dm.REQUIRED_FILES:
            (final / name).write_text("winner")
        return out_dir

    monkeypatch.setattr(dm, "build_default_model", fake_build)
    assert dm.default_model_dir() == final
    assert (final / "config.json").read_text() == "winner"
    assert not [p for p in final.parent.iterdir() if ".tmp-" in p.name]


def test_corpus_is_deterministic() -> None:
    first = corpus_texts()
    assert first == corpus_texts()
    assert hashlib.sha256("\x00".join(first).encode()).hexdigest() == hashlib.sha256(
        "\x00".join(corpus_texts()).encode()
    ).hexdigest()


ROUND_TRIP = [
    "",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n",
    "def f(x):\n    return x ** 2  # comment\n",
    "你好，世界！日本語のテキスト、한국어",
    "emoji 😀🚀👩‍💻🏳️‍🌈 and flags 🇩🇪",
    "mixed: café naïve Ångström ∑∫√ \u200b zero-width \U0001f9ea",
    "<|im_start|>user\nhi<|im_end|>\n",
    "\x00\x01 control chars \x7f",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_tokenizer_round_trip(two_builds: tuple[Path, Path], text: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(two_builds[0]))
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_tokenizer_specials_and_chat_template(two_builds: tuple[Path, Path]) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(two_builds[0]))
    assert len(tok) == dm.VOCAB_SIZE
    assert tok.convert_tokens_to_ids(list(dm.SPECIAL_TOKENS)) == [0, 1, 2]
    assert tok.eos_token == dm.IM_END and tok.pad_token == dm.EOS_TOKEN
    assert tok.encode("<|im_start|>", add_special_tokens=False) == [1]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )
    no_prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert no_prompt.endswith("Hi!<|im_end|>\n")


def test_loads_with_transformers_and_decodes_varied_tokens(two_builds: tuple[Path, Path]) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(two_builds[0])).eval()
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        8, 512, 8, 2,
    )
    assert cfg.head_dim == 64 and cfg.vocab_size == dm.VOCAB_SIZE and not cfg.tie_word_embeddings
    assert model.generation_config.eos_token_id == [2, 0]
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, dm.VOCAB_SIZE, (2, 10), generator=gen)
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=24, do_sample=False, eos_token_id=None, pad_token_id=0)
        logits = model(out).logits
    for row in out[:, 10:]:
        assert len(set(row.tolist())) >= 12  # not degenerate
    top2 = logits.topk(2, dim=-1).values
    gaps = (top2[..., 0] - top2[..., 1]).flatten()
    assert torch.quantile(gaps, 0.5) > 1e-1
    assert (gaps > 1e-3).float().mean() > 0.95
