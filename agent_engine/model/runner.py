"""Runs one scheduler step on an HF causal LM over our paged KV cache.

Invariants:

* ``ScheduledRequest.block_ids`` is the request's whole block table in position order (block ``j``
  holds positions ``[j * block_size, (j + 1) * block_size)``); ids are in ``[1, num_kv_blocks)``, 0 is
  the reserved null block. Its tokens are computed at positions ``num_computed_tokens + arange(n)``.
* One decoder forward per step over the packed batch ``[1, T]``; logits are computed only at the last
  token of requests with ``do_sample`` (never ``[T, V]``). On CPU, Llama-family models run through
  ``LeanDecoder`` (fused projections, C++ kernels); anything else through the HF modules with our
  paged attention plugged in. Both compute the same function on the same weights. A model given with
  ``quantized`` weights (its own on ``meta``) runs only in the ``LeanDecoder``, on those weights.
* The runner's device is the one asked for, else that of the model's real (non-``meta``) parameters.
* Per-request sampler state is dropped for ``finished_req_ids`` before the step runs, and the
  second tier's ``kv_copies`` are performed, in order, before the forward pass reads the cache.
* On CUDA with ``decode_graph_rows > 0``, a step of decodes alone (every row sampled) of at most that
  many rows replays a CUDA graph of the same computation (``decode_graphs``); other steps run eagerly.
* ``execute(out, grammar=TokenBitmask)`` limits the constrained requests' sampled tokens to their
  bitmask rows (structured outputs); without it (the default) sampling does no grammar work.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Sequence

import torch
from transformers import PretrainedConfig

from agent_engine.model.attention import KV_CACHES_KWARG, METADATA_KWARG, sdpa_backends, use_paged_attention
from agent_engine.model.decode_graphs import DecodeGraphs
from agent_engine.model.lean_decoder import LeanDecoder, QuantizedWeights, model_device
from agent_engine.model.sampler import Sampler, SamplerOutput, SamplingRequest, TokenBitmask
from kernels import AttentionWorkspace, allocate_kv_caches, build_attention_metadata
from kernels.kv_offload import HostKVStore
from kernels.static_decode import StaticDecodeBatch
from scheduler.step_io import ModelRunnerOutput, SchedulerOutput
from scheduler.tier_copy import LOAD

logger = logging.getLogger(__name__)


def kv_shape_from_config(config: PretrainedConfig) -> tuple[int, int, int]:
    """``(num_layers, num_kv_heads, head_dim)`` of a decoder config (text config for multimodal ones)."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    num_heads = config.num_attention_heads
    num_kv_heads = getattr(config, "num_key_value_heads", None) or num_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // num_heads
    return config.num_hidden_layers, num_kv_heads, head_dim


PROFILE_CHUNK = 512  # tokens per step of the start-up prefill profile


def _return_freed_memory() -> None:
    """Ask glibc to give freed heap memory back to the OS (``malloc_trim``; nothing elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class ModelRunner:
    """Owns the per-layer KV caches and executes ``SchedulerOutput`` steps on ``model``.

    ``model`` is a loaded HF causal LM already on its device/dtype; its attention implementation is
    switched to ours in place. ``last_logits`` keeps the float32 logits of the latest step (rows in the
    order of sampled requests) for tests and debugging; they may live in a buffer that the next step
    rewrites (the lean decoder's LM head output), so clone them to keep them longer.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        num_kv_blocks: int,
        block_size: int,
        device: torch.device | str | None = None,
        seed: int = 0,
        num_offload_blocks: int = 0,
        offload_dtype: str = "auto",
        kv_cache_dtype: str = "auto",
        quantized: QuantizedWeights | None = None,
        decode_graph_rows: int = 0,
        max_step_rows: int | None = None,
    ) -> None:
        if num_kv_blocks < 2:
            raise ValueError("num_kv_blocks must be >= 2 (block 0 is reserved)")
        self.device = torch.device(device) if device is not None else model_device(model)
        self.model = model.eval()
        self.block_size = block_size
        self.num_kv_blocks = num_kv_blocks
        self.num_layers, self.num_kv_heads, self.head_dim = kv_shape_from_config(model.config)
        use_paged_attention(model)
        self._decoder = model.get_decoder()
        self._lm_head = model.get_output_embeddings()
        if quantized is not None and self.device.type != "cpu":
            raise ValueError(f"a model served from quantized weights runs on the CPU, not {self.device}")
        self.lean = LeanDecoder.build(model, quantized, max_step_rows) if self.device.type == "cpu" else None
        self.kv_dtype = self.kv_dtype_for(model, kv_cache_dtype)
        self.kv_caches = allocate_kv_caches(
            self.num_layers, num_kv_blocks, block_size, self.num_kv_heads, self.head_dim, self.kv_dtype, self.device
        )
        self.offload = HostKVStore(num_offload_blocks, self.kv_caches, offload_dtype) if num_offload_blocks else None
        self.sampler = Sampler(self.device, seed)
        self.workspace = AttentionWorkspace()
        self.last_logits: torch.Tensor | None = None
        self.graphs = self._decode_graphs(decode_graph_rows) if decode_graph_rows and self.lean is None else None

    def _decode_graphs(self, max_rows: int) -> DecodeGraphs | None:
        """CUDA graphs for decode steps of up to ``max_rows`` rows (``decode_graphs``); None off CUDA."""
        if self.device.type != "cuda":
            return None
        return DecodeGraphs(self._static_decode_step, max_rows, self.num_kv_blocks - 1, self.block_size,
                            self.device)

    def _static_decode_step(self, batch: StaticDecodeBatch) -> torch.Tensor:
        """The float32 logits ``[rows, V]`` of a fixed-shape decode step, from its buffers alone (what a
        decode graph records)."""
        kwargs = {METADATA_KWARG: batch.metadata, KV_CACHES_KWARG: self.kv_caches}
        with torch.inference_mode(), sdpa_backends(self.device):
            hidden = self._decoder(input_ids=batch.input_ids.view(1, -1), position_ids=batch.positions.view(1, -1),
                                   use_cache=False, **kwargs).last_hidden_state[0]
            return self._lm_head(hidden).float()

    @staticmethod
    def kv_dtype_for(model: torch.nn.Module, kv_cache_dtype: str = "auto") -> torch.dtype:
        """The dtype of the KV cache a runner of ``model`` allocates for ``kv_cache_dtype`` (auto: the
        model's dtype where the cache holds it; ``LeanDecoder.kv_cache_dtype``; ValueError where
        unsupported)."""
        return LeanDecoder.kv_cache_dtype(model, kv_cache_dtype)

    @staticmethod
    def kv_cache_bytes_per_block(config: PretrainedConfig, block_size: int, dtype: torch.dtype) -> int:
        """Bytes one block takes across all layers, K and V together."""
        num_layers, num_kv_heads, head_dim = kv_shape_from_config(config)
        itemsize = torch.empty((), dtype=dtype).element_size()
        return 2 * num_layers * block_size * num_kv_heads * head_dim * itemsize

    def _forward(
        self,
        token_ids: list[int],
        query_lens: list[int],
        context_lens: list[int],
        block_tables: list[list[int]],
        sample_rows: list[int],
    ) -> torch.Tensor:
        """Run the decoder on the packed batch; return float32 logits at ``sample_rows`` ``[len, V]``.
        A step of decodes alone, every row sampled, replays a decode graph where one fits."""
        if self.graphs is not None and len(token_ids) == len(query_lens) == len(sample_rows):
            logits = self.graphs.run(token_ids, context_lens, block_tables)
            if logits is not None:
                return logits
        metadata = build_attention_metadata(
            query_lens, context_lens, block_tables, self.block_size, self.device, self.workspace
        )
        input_ids = torch.tensor(token_ids, dtype=torch.int64, device=self.device)
        rows = torch.tensor(sample_rows, dtype=torch.int64, device=self.device)
        with torch.inference_mode(), sdpa_backends(self.device):
            if self.lean is not None:
                hidden = self.lean.forward(input_ids, metadata, self.kv_caches, rows)
            else:
                kwargs = {METADATA_KWARG: metadata, KV_CACHES_KWARG: self.kv_caches}
                hidden = self._decoder(
                    input_ids=input_ids.view(1, -1), position_ids=metadata.positions.view(1, -1),
                    use_cache=False, **kwargs,
                ).last_hidden_state[0].index_select(0, rows)
            if not sample_rows:
                return hidden.new_empty(0, 0, dtype=torch.float32)
            if self.lean is not None:  # the matmul kernel for this many rows (kernels.cpu_ops.linear)
                return self.lean.logits(hidden, self.workspace).float()
            return self._lm_head(hidden).float()

    def execute(self, scheduler_output: SchedulerOutput, grammar: TokenBitmask | None = None) -> ModelRunnerOutput:
        """Compute every scheduled chunk and sample one token for each request with ``do_sample``
        (requests in ``grammar`` only among the tokens their bitmask allows)."""
        if scheduler_output.finished_req_ids:
            self.sampler.drop(scheduler_output.finished_req_ids)
        if scheduler_output.kv_copies:
            if self.offload is None:
                raise RuntimeError("second-tier copies scheduled, but this runner has no KV store")
            self.offload.apply(scheduler_output.kv_copies)
        if not scheduler_output.scheduled:
            return ModelRunnerOutput()
        token_ids: list[int] = []
        query_lens: list[int] = []
        context_lens: list[int] = []
        tables: list[list[int]] = []
        sample_rows: list[int] = []
        sampled = []
        for req in scheduler_output.scheduled:
            token_ids += req.token_ids
            query_lens.append(len(req.token_ids))
            context_lens.append(req.num_computed_tokens)
            tables.append(req.block_ids)
            if req.do_sample:
                sample_rows.append(len(token_ids) - 1)
                sampled.append(req)
        logits = self._forward(token_ids, query_lens, context_lens, tables, sample_rows)
        self.last_logits = logits
        out = ModelRunnerOutput()
        if not sampled:
            return out
        result = self._sample_isolated(logits, sampled, out, grammar)
        for i, req in enumerate(sampled):
            if result.token_ids[i] is None:
                continue
            out.sampled_token_ids[req.request_id] = result.token_ids[i]
            if result.logprobs:
                out.logprobs[req.request_id] = result.logprobs[i]
            top = result.top_logprobs[i]
            if top is not None:
                out.top_logprobs[req.request_id] = top
        return out

    def _sample_isolated(self, logits: torch.Tensor, sampled: Sequence[SamplingRequest], out: ModelRunnerOutput,
                         grammar: TokenBitmask | None = None) -> SamplerOutput:
        """Sample the batch; if that fails, sample row by row so only the requests whose own sampling
        fails are marked in ``out.failed`` (their token is None) and every other request goes on."""
        with torch.inference_mode():
            try:
                return self._sample(logits, sampled, grammar)
            except Exception:  # noqa: BLE001 - find the culprit rows below
                pass
            merged = SamplerOutput([], [], [])
            any_logprobs = False
            for i, req in enumerate(sampled):
                try:
                    one = self._sample(logits[i : i + 1], [req], grammar)
                except Exception as exc:  # noqa: BLE001 - this request fails, not the batch
                    out.failed[req.request_id] = f"sampling failed: {type(exc).__name__}: {exc}"
                    merged.token_ids.append(None)
                    merged.logprobs.append(0.0)
                    merged.top_logprobs.append(None)
                    continue
                merged.token_ids.append(one.token_ids[0])
                merged.logprobs.append(one.logprobs[0] if one.logprobs else 0.0)
                merged.top_logprobs.append(one.top_logprobs[0])
                any_logprobs = any_logprobs or bool(one.logprobs)
            if not any_logprobs:
                merged.logprobs = []  # as the batched sampler reports: none asked for logprobs
            return merged

    def _sample(self, logits: torch.Tensor, requests: Sequence[SamplingRequest], grammar: TokenBitmask | None) -> SamplerOutput:
        if grammar is None:  # the unconstrained call, unchanged
            return self.sampler.sample(logits, requests)
        return self.sampler.sample(logits, requests, grammar)

    def profile_tier_load(self, lengths: Sequence[int], repeats: int = 3) -> list[float]:
        """Seconds to load a context of each length back from the second tier (best of ``repeats``):
        the demoted job's reload cost. Uses the first blocks of the pool and of the store: call it
        before serving. ``[]`` without a tier."""
        if self.offload is None:
            return []
        times = []
        for length in lengths:
            n = min(-(-length // self.block_size), self.num_kv_blocks - 1, self.offload.num_slots)
            copies = [(LOAD, i, i + 1) for i in range(n)]
            best = float("inf")
            for _ in range(max(1, repeats)):
                self._sync()
                t0 = time.perf_counter()
                self.offload.apply(copies)
                self._sync()
                best = min(best, time.perf_counter() - t0)
            times.append(best * -(-length // self.block_size) / max(1, n))
        self.offload.load_seconds = 0.0
        return times

    def profile_prefill(self, lengths: Sequence[int], repeats: int = 1, chunk: int = PROFILE_CHUNK) -> list[float]:
        """Seconds to prefill a fresh context of each length (best of ``repeats``, after one warm-up), in
        steps of at most ``chunk`` tokens as a server's token budget splits a prompt.

        Uses blocks ``1..ceil(L / block_size)`` of the real cache and overwrites them: call it before
        serving, while no block holds live or cached KV. Raises ``ValueError`` if a length does not fit.
        The step workspace is released afterwards and the heap trimmed, so no profile buffer stays
        resident while serving.
        """
        max_blocks = self.num_kv_blocks - 1
        gen = torch.Generator().manual_seed(0)
        vocab = self._lm_head.weight.shape[0]
        times: list[float] = []
        for i, length in enumerate(lengths):
            num_blocks = -(-length // self.block_size)
            if length < 1 or num_blocks > max_blocks:
                raise ValueError(f"cannot profile length {length}: needs {num_blocks} of {max_blocks} blocks")
            tokens = torch.randint(0, vocab, (length,), generator=gen).tolist()
            table = list(range(1, num_blocks + 1))
            if i == 0:
                self._prefill_in_chunks(tokens, table, chunk)
            best = float("inf")
            for _ in range(max(1, repeats)):
                self._sync()
                t0 = time.perf_counter()
                self._prefill_in_chunks(tokens, table, chunk)
                self._sync()
                best = min(best, time.perf_counter() - t0)
            times.append(best)
        self.workspace.release()
        _return_freed_memory()
        return times

    def profile_steps(self, widths: Sequence[int], seq_tokens: int, warm_up: bool = True) -> list[float]:
        """Seconds of one step of each width: ``width / seq_tokens`` fresh prompts of ``seq_tokens`` tokens
        each (after a warm-up step of the widest width, unless not ``warm_up``). Every prompt is as long
        at every width, so attention costs the same a token and the widths differ in how many rows each
        matmul multiplies: what a wider token budget changes.

        Uses the first blocks of the real cache and overwrites them: call it before serving, while no
        block holds live or cached KV. Raises ``ValueError`` for a width that is not a multiple of
        ``seq_tokens`` or does not fit the pool. The step workspace is released afterwards and the heap
        trimmed.
        """
        per_seq = -(-seq_tokens // self.block_size)
        for width in widths:
            if width < seq_tokens or width % seq_tokens or width // seq_tokens * per_seq > self.num_kv_blocks - 1:
                raise ValueError(f"cannot profile a step of {width} tokens in prompts of {seq_tokens} "
                                 f"in {self.num_kv_blocks - 1} blocks of {self.block_size}")
        gen = torch.Generator().manual_seed(0)
        vocab = self._lm_head.weight.shape[0]

        def step(width: int) -> None:
            n = width // seq_tokens
            tokens = torch.randint(0, vocab, (width,), generator=gen).tolist()
            tables = [list(range(1 + i * per_seq, 1 + (i + 1) * per_seq)) for i in range(n)]
            self._forward(tokens, [seq_tokens] * n, [0] * n, tables, [(i + 1) * seq_tokens - 1 for i in range(n)])

        if warm_up:
            step(max(widths))
        times: list[float] = []
        for width in widths:
            self._sync()
            t0 = time.perf_counter()
            step(width)
            self._sync()
            times.append(time.perf_counter() - t0)
        self.workspace.release()
        _return_freed_memory()
        return times

    def _prefill_in_chunks(self, tokens: list[int], block_table: list[int], chunk: int = PROFILE_CHUNK) -> None:
        """A fresh prefill of ``tokens`` in steps of at most ``chunk`` tokens, as a server's token budget
        splits it (and with activation buffers of that size, not the whole context's)."""
        for start in range(0, len(tokens), chunk):
            part = tokens[start : start + chunk]
            self._forward(part, [len(part)], [start], [block_table], [len(part) - 1])

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
