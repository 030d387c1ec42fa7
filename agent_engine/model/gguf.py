"""What transformers' GGUF reader makes of a GGUF file, cached: its metadata folder, or a float32 copy.

``cached_metadata`` writes the small files a model served from the GGUF itself needs (config.json,
the tokenizer, generation_config.json: seconds to tens of seconds to parse from the file's metadata,
a 150k vocabulary included); ``cached_conversion`` writes a whole float32 Hugging Face folder (the
``--gguf-weights float32`` path, and the fallback where the file cannot be served natively).

Invariants:
- A GGUF's metadata and weights are read only through transformers' GGUF support (it needs the
  ``gguf`` and ``accelerate`` packages: the ``smollm2`` extra). A conversion dequantizes the weights to
  float32 and saves them as safetensors; both folders' config has no ``quantization_config`` and
  dtype float32, so the converted folder loads like any HF checkpoint.
- The saved tokenizer keeps the file's chat template; generation_config.json keeps its eos id. A
  metadata folder's config, tokenizer and generation config are those of the converted folder.
- Both publish atomically: a folder is built in a private temp folder under the cache and renamed into
  place, so a folder that exists is complete. Racing processes serialize on a lock file and build
  once. The cache keys carry ``CONVERTER_VERSION`` (a conversion) or ``METADATA_VERSION``.
- Bad input raises ``ValueError`` naming the file: missing, not a GGUF (bad magic bytes), corrupt or
  truncated (or not a causal LM), an architecture transformers does not read, the GGUF packages missing.
- A conversion reads no tensor before the file's tensor table is checked (``gguf_tensors.check_layout``:
  every tensor inside the data section, no two overlapping; little-endian files, the ones the table
  reader parses): a tampered file is refused naming its tensors, never converted into a wrong model.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_engine.paths import models_dir

logger = logging.getLogger(__name__)

CONVERTER_VERSION = "c1"  # bump when the converted folder's contents change
METADATA_VERSION = "m1"  # bump when the metadata folder's contents change
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)  # what the gguf package reads (version 1 had 32-bit counts)
GGUF_HEADER_BYTES = 24  # magic, uint32 version, uint64 tensor count, uint64 metadata entry count
MIN_TENSOR_INFO_BYTES = 24  # name length (8), dimension count (4), type (4), data offset (8)
MIN_KV_BYTES = 13  # key length (8), value type (4), the smallest value (1)
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json")
METADATA_FILES = ("config.json", "tokenizer.json", "generation_config.json")
_INSTALL_HINT = "pip install 'agent-engine[smollm2]'"


def check_gguf_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` if it is a readable file that starts with a plausible GGUF header (the magic
    bytes, a known version, tensor and metadata counts that fit the file), else ``ValueError``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"GGUF file not found: {p}")
    try:
        with p.open("rb") as f:
            header = f.read(GGUF_HEADER_BYTES)
        size = p.stat().st_size
    except OSError as exc:
        raise ValueError(f"cannot read GGUF file {p}: {exc}") from exc
    if header[: len(GGUF_MAGIC)] != GGUF_MAGIC:
        raise ValueError(f"{p} is not a GGUF file (it does not start with the bytes {GGUF_MAGIC!r})")
    problem = _header_problem(header, size)
    if problem is not None:
        raise ValueError(f"cannot read GGUF file {p}: corrupt header: {problem}")
    return p


def _header_problem(header: bytes, size: int) -> str | None:
    """Why the fixed header (magic, version, tensor count, metadata count) cannot be a GGUF's, or None.

    The counts are checked against the file's size: each tensor's description takes at least
    ``MIN_TENSOR_INFO_BYTES`` and each metadata entry ``MIN_KV_BYTES``, so a count the file cannot
    hold is a corrupt header (the readers would otherwise fail later with an unrelated message)."""
    if len(header) < GGUF_HEADER_BYTES:
        return f"the file has {len(header)} bytes, fewer than the {GGUF_HEADER_BYTES}-byte header"
    order = "<"
    version = struct.unpack_from("<I", header, 4)[0]
    if version not in GGUF_VERSIONS and struct.unpack_from(">I", header, 4)[0] in GGUF_VERSIONS:
        order, version = ">", struct.unpack_from(">I", header, 4)[0]  # a big-endian file
    if version not in GGUF_VERSIONS:
        return f"version {version} (bytes 4-8) is not one of the GGUF versions {list(GGUF_VERSIONS)}"
    tensors, entries = struct.unpack_from(f"{order}QQ", header, 8)
    need = GGUF_HEADER_BYTES + tensors * MIN_TENSOR_INFO_BYTES + entries * MIN_KV_BYTES
    if need > size:
        return (f"it declares {tensors} tensors and {entries} metadata entries (bytes 8-24), more than "
                f"its {size} bytes can hold")
    return None


def gguf_file_key(path: Path) -> str:
    """A cache key for a GGUF file: its name plus a hash of its resolved path, size and mtime."""
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return f"{path.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def is_converted(folder: Path) -> bool:
    """True when ``folder`` holds every file a conversion writes."""
    return _complete(folder, REQUIRED_FILES)


def cached_conversion(key: str, name: str, source: Callable[[], Path]) -> Path:
    """The cached HF folder ``<models>/gguf/<key>-<CONVERTER_VERSION>/<name>``, converted if missing.

    ``source`` gives the GGUF path; it is called only when the folder must be built (so a named model's
    download happens at most once). The folder's name is the served model name.
    """
    return _cached_folder(f"{key}-{CONVERTER_VERSION}", name, source, convert_gguf, REQUIRED_FILES,
                          "converting %s to a float32 Hugging Face folder %s (once)")


def cached_metadata(key: str, name: str, source: Callable[[], Path]) -> Path:
    """The cached folder ``<models>/gguf/<key>-meta-<METADATA_VERSION>/<name>`` of the GGUF's config,
    tokenizer and generation config (no weights), written if missing; ``source`` as for a conversion."""
    return _cached_folder(f"{key}-meta-{METADATA_VERSION}", name, source, write_metadata, METADATA_FILES,
                          "reading the config and tokenizer of %s into %s (once)")


def _cached_folder(entry: str, name: str, source: Callable[[], Path], build: Callable[[Path, Path], Path],
                   required: tuple[str, ...], message: str) -> Path:
    root = models_dir() / "gguf"
    final = root / entry / name
    if _complete(final, required):
        return final
    root.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(root / f".{entry}.lock")):
        if not _complete(final, required):
            gguf_path = source()
            logger.warning(message, gguf_path, final)
            _build_and_publish(gguf_path, final, build)
    return final


def _complete(folder: Path, required: tuple[str, ...]) -> bool:
    return all((folder / name).is_file() for name in required)


def _build_and_publish(gguf_path: Path, final: Path, build: Callable[[Path, Path], Path]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent.parent))
    try:
        build(gguf_path, tmp / final.name)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the published model is world-readable
        if final.parent.exists():  # an incomplete leftover (only renames publish): replace it
            shutil.rmtree(final.parent)
        os.rename(tmp, final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_metadata(gguf_path: Path, out_dir: Path) -> Path:
    """Write the GGUF's config (float32, no quantization config, the causal-LM class as a saved model's
    config names it), tokenizer and generation config."""
    from transformers import GenerationConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    gguf_path = check_gguf_file(gguf_path)
    require_gguf_support()
    config = _plain_config(_read(gguf_path, "config", _load_config))
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    if isinstance(model_class, str):
        config.architectures = [model_class]
    tokenizer = _read(gguf_path, "tokenizer", _load_tokenizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out_dir)
    GenerationConfig.from_model_config(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantize ``gguf_path`` to float32 and write a plain HF folder (weights, config, tokenizer)."""
    gguf_path = check_gguf_file(gguf_path)
    require_gguf_support()
    check_tensor_layout(gguf_path)
    model = _read(gguf_path, "weights", _load_model)
    tokenizer = _read(gguf_path, "tokenizer", _load_tokenizer)
    plain = _plain_model(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def check_tensor_layout(path: Path) -> None:
    """``ValueError`` naming the file and its tensors when a tensor lies outside the file's data section
    or overlaps another (``gguf_tensors.check_layout``); a big-endian file is left to gguf-py's reader."""
    from agent_engine.model.gguf_tensors import read_tensor_table

    with path.open("rb") as f:
        header = f.read(8)
    if struct.unpack_from("<I", header, 4)[0] not in GGUF_VERSIONS:
        return
    try:
        read_tensor_table(path)
    except ValueError as exc:
        raise ValueError(f"cannot read GGUF file {path}: corrupt, truncated or tampered with ({exc})") from exc


def require_gguf_support() -> None:
    """``ValueError`` with the install command unless the packages transformers' GGUF reader needs exist."""
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"reading a GGUF file needs the packages {missing}: {_INSTALL_HINT}")


def _load_model(folder: str, name: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)


def _load_config(folder: str, name: str) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder, gguf_file=name)


def _load_tokenizer(folder: str, name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, gguf_file=name)


def _read(path: Path, what: str, reader: Callable[[str, str], Any]) -> Any:
    """Run one transformers GGUF reader; turn every failure into a ``ValueError`` that names the file."""
    try:
        return reader(str(path.parent), path.name)
    except ImportError as exc:
        raise ValueError(f"reading {path} needs the GGUF packages ({exc}): {_INSTALL_HINT}") from exc
    except Exception as exc:  # the GGUF readers raise many types on bad bytes
        arch = gguf_architecture(path)
        if arch is not None and not _arch_supported(arch):
            raise ValueError(
                f"unsupported GGUF architecture {arch!r} in {path}; transformers reads {supported_architectures()}"
            ) from exc
        raise ValueError(f"cannot read GGUF file {path}: corrupt, truncated or not a causal LM (reading its "
                         f"{what}: {type(exc).__name__}: {exc})") from exc


def gguf_architecture(path: Path) -> str | None:
    """``general.architecture`` of a GGUF file, or ``None`` if its metadata cannot be read."""
    try:
        from gguf import GGUFReader

        field = GGUFReader(str(path)).fields.get("general.architecture")
        return None if field is None else str(field.contents())
    except Exception:  # a corrupt file: the caller reports it as such
        return None


def supported_architectures() -> list[str]:
    """The GGUF architectures transformers reads (its own list)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(GGUF_SUPPORTED_ARCHITECTURES)


def _arch_supported(arch: str) -> bool:
    names = supported_architectures()
    return arch in names or arch.replace("-", "_") in names or arch.replace("moe", "_moe") in names


def _plain_model(model: Any) -> Any:
    """The same weights in a fresh model whose config has no ``quantization_config`` (saveable)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = _plain_config(copy.deepcopy(model.config))
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.eval()


def _plain_config(config: Any) -> Any:
    """``config`` without a ``quantization_config``, dtype float32 (changed in place, returned)."""
    import torch

    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.float32
    return config
