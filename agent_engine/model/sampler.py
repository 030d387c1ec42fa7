"""Batched sampling of one token per request from float32 logits ``[B, V]``.

Per row, in order: min_tokens masking (EOS unless ``ignore_eos``, and ``stop_token_ids``, get -inf while
``num_output_tokens < min_tokens``), then greedy argmax (temperature 0) or temperature scaling, top-k,
top-p and a draw. Reported logprobs are ``log_softmax`` of the RAW logits (the model's distribution
before any of the above, as vLLM reports by default); top-N alternatives are the N best of that
distribution, best first.

Randomness: a request with ``seed`` draws from its own generator, reseeded every step from
``(seed, num_output_tokens)``; its tokens therefore depend only on its own logits and seed, not on
batch composition, step count or preemption. Other requests share the engine generator.
Draws invert the row's CDF at one uniform number (the first token whose cumulative probability, summed
in float64, exceeds ``u`` times the row's total), which samples exactly from ``p`` with one random number
per row (the exponential race ``argmax(p / E)`` drew one per vocabulary entry).

Structured outputs: ``sample(..., grammar=TokenBitmask)`` masks the constrained rows (after min_tokens,
before greedy/temperature/top-k/top-p) with their packed allowed-token bitmask; tokens past the
bitmask's width (a logits vocabulary padded beyond the tokenizer's) are disallowed. If min_tokens
masked every token the grammar allows (the grammar is complete: only a stop token may follow), the
grammar wins. A row the grammar leaves no token raises. Without constrained rows nothing is done.
Logprobs stay those of the raw logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import torch

from scheduler.sampling_params import SamplingParams

_SEED_STRIDE = 1_000_003


class SamplingRequest(Protocol):
    """What the sampler reads of a request (``ScheduledRequest`` satisfies it)."""

    request_id: str
    sampling_params: SamplingParams
    num_output_tokens: int
    eos_token_id: int | None


@dataclass
class SamplerOutput:
    """One entry per input row: the sampled token, its logprob, and top-N alternatives (or None)."""

    token_ids: list[int]
    logprobs: list[float]  # empty when no request in the batch asked for logprobs
    top_logprobs: list[list[tuple[int, float]] | None]


@dataclass
class TokenBitmask:
    """Allowed tokens of the constrained rows of one step: ``bitmask[rows[request_id]]`` is that request's
    packed mask (int32 ``[k, ceil(V / 32)]``, bit ``t % 32`` of word ``t // 32`` set = token ``t`` allowed;
    xgrammar's layout). Requests not in ``rows`` are unconstrained.

    ``ready`` (optional) is the future of the fill that writes ``bitmask``: it may still run while the
    model computes the logits; ``select`` waits for it before the bitmask is read."""

    bitmask: torch.Tensor
    rows: dict[str, int]
    ready: Future[None] | None = None

    def select(self, request_ids: Sequence[str]) -> tuple[list[int], torch.Tensor] | None:
        """``(logit rows, their bitmask rows)`` for a batch whose row ``i`` is ``request_ids[i]``; None if
        no row is constrained."""
        idx = [i for i, rid in enumerate(request_ids) if rid in self.rows]
        if not idx:
            return None
        if self.ready is not None:
            self.ready.result()
        bm_rows = [self.rows[request_ids[i]] for i in idx]
        if bm_rows == list(range(self.bitmask.shape[0])):
            return idx, self.bitmask
        return idx, self.bitmask[torch.tensor(bm_rows, dtype=torch.int64)]


_BIT_SHIFTS: dict[torch.device, torch.Tensor] = {}


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set disallowed tokens of ``logits`` ``[k, V]`` to -inf in place (``bitmask`` ``[k, W]`` int32).

    On CUDA: xgrammar's kernel. Elsewhere: the bits unpacked with torch (a shift, an and, one masked
    fill), several times faster on CPU than the library's CPU kernel. Columns past ``32 * W`` (a
    vocabulary padded beyond the tokenizer's) are disallowed too."""
    bitmask = bitmask.to(logits.device, non_blocking=True)
    covered = bitmask.shape[1] * 32
    vocab = logits.shape[1]
    if logits.device.type == "cuda":
        import xgrammar

        xgrammar.apply_token_bitmask_inplace(logits, bitmask, vocab_size=min(vocab, covered))
    else:
        shifts = _BIT_SHIFTS.get(logits.device)
        if shifts is None:
            shifts = _BIT_SHIFTS[logits.device] = torch.arange(32, dtype=torch.int32, device=logits.device)
        allowed = ((bitmask.unsqueeze(-1) >> shifts) & 1).view(bitmask.shape[0], covered)[:, :vocab]
        logits[:, : allowed.shape[1]].masked_fill_(allowed == 0, float("-inf"))
    if vocab > covered:
        logits[:, covered:] = float("-inf")


class Sampler:
    """Stateless apart from the shared generator and cached per-request generators."""

    def __init__(self, device: torch.device | str = "cpu", seed: int = 0) -> None:
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._req_generators: dict[str, torch.Generator] = {}

    def drop(self, request_ids: Sequence[str] | set[str]) -> None:
        """Forget cached generators of finished/aborted requests."""
        for rid in request_ids:
            self._req_generators.pop(rid, None)

    def _request_generator(self, req: SamplingRequest) -> torch.Generator:
        gen = self._req_generators.get(req.request_id)
        if gen is None:
            gen = torch.Generator(device=self.device)
            self._req_generators[req.request_id] = gen
        seed = req.sampling_params.seed
        assert seed is not None
        gen.manual_seed((seed * _SEED_STRIDE + req.num_output_tokens) & 0xFFFF_FFFF_FFFF_FFFF)
        return gen

    def sample(self, logits: torch.Tensor, requests: Sequence[SamplingRequest],
               grammar: TokenBitmask | None = None) -> SamplerOutput:
        """Sample one token per row of ``logits`` (float32 ``[B, V]``, row ``i`` belongs to ``requests[i]``);
        rows of requests in ``grammar`` sample only tokens their bitmask allows."""
        if logits.shape[0] != len(requests):
            raise ValueError(f"{logits.shape[0]} logit rows for {len(requests)} requests")
        logits = logits.float()
        params = [r.sampling_params for r in requests]
        masked = self._apply_min_tokens(logits, requests)
        if grammar is not None and (sel := grammar.select([r.request_id for r in requests])) is not None:
            masked = self._apply_grammar(logits, masked, *sel)
        if all(p.greedy for p in params):
            token_ids = masked.argmax(dim=-1)
        else:
            token_ids = self._sample_mixed(masked, requests)
        top: list[list[tuple[int, float]] | None] = [None] * len(requests)
        if all(p.logprobs is None for p in params):
            # Nobody asked: skip the O(B * V) normaliser (the hot decode path).
            return SamplerOutput(token_ids.tolist(), [], top)
        log_z = torch.logsumexp(logits, dim=-1, keepdim=True)  # raw log_softmax = logits - log_z
        sampled_lp = (logits.gather(1, token_ids[:, None]) - log_z)[:, 0]
        max_n = max((p.logprobs or 0) for p in params)
        if max_n > 0:
            top_vals, top_ids = logits.topk(max_n, dim=-1)
            top_vals = top_vals - log_z
            top_vals_l, top_ids_l = top_vals.tolist(), top_ids.tolist()
            for i, p in enumerate(params):
                if p.logprobs:
                    top[i] = list(zip(top_ids_l[i][: p.logprobs], top_vals_l[i][: p.logprobs], strict=True))
        return SamplerOutput(token_ids.tolist(), sampled_lp.tolist(), top)

    @staticmethod
    def _apply_min_tokens(logits: torch.Tensor, requests: Sequence[SamplingRequest]) -> torch.Tensor:
        """Return logits with stop tokens at -inf for rows still below ``min_tokens`` (copy only if needed)."""
        rows: list[int] = []
        cols: list[int] = []
        vocab = logits.shape[1]
        for i, r in enumerate(requests):
            p = r.sampling_params
            if r.num_output_tokens >= p.min_tokens:
                continue
            stops = set(p.stop_token_ids)
            if r.eos_token_id is not None and not p.ignore_eos:
                stops.add(r.eos_token_id)
            for t in stops:
                if 0 <= t < vocab:
                    rows.append(i)
                    cols.append(t)
        if not rows:
            return logits
        out = logits.clone()
        out[torch.tensor(rows, device=logits.device), torch.tensor(cols, device=logits.device)] = float("-inf")
        return out

    @staticmethod
    def _apply_grammar(raw: torch.Tensor, masked: torch.Tensor, idx: list[int],
                       bitmask: torch.Tensor) -> torch.Tensor:
        """``masked`` with rows ``idx`` limited to their bitmask (a copy; ``raw`` is never written)."""
        if masked is raw:
            masked = raw.clone()
        rows = torch.tensor(idx, dtype=torch.int64, device=raw.device)
        sub = masked.index_select(0, rows)
        apply_token_bitmask(sub, bitmask)
        dead = torch.isneginf(sub).all(dim=-1)
        if bool(dead.any()):
            # min_tokens masked the only tokens the grammar allows (it is complete): the grammar wins.
            redo = raw.index_select(0, rows[dead])
            apply_token_bitmask(redo, bitmask.to(raw.device)[dead])
            if bool(torch.isneginf(redo).all(dim=-1).any()):
                raise ValueError("the output grammar allows no token")
            sub[dead] = redo
        masked[rows] = sub
        return masked

    def _sample_mixed(self, logits: torch.Tensor, requests: Sequence[SamplingRequest]) -> torch.Tensor:
        """Sample a batch where at least one row is not greedy."""
        params = [r.sampling_params for r in requests]
        greedy_ids = logits.argmax(dim=-1)
        temps = torch.tensor(
            [p.temperature if not p.greedy else 1.0 for p in params], dtype=logits.dtype, device=logits.device
        )
        scaled = logits / temps[:, None]
        if any(p.top_k > 0 or p.top_p < 1.0 for p in params):
            probs, order = self._top_k_top_p_probs(scaled, params)
        else:
            probs, order = torch.softmax(scaled, dim=-1), None
        choice = self._draw(probs, requests)
        if order is not None:
            choice = order.gather(1, choice[:, None])[:, 0]
        is_greedy = torch.tensor([p.greedy for p in params], device=logits.device)
        return torch.where(is_greedy, greedy_ids, choice)

    def _draw(self, probs: torch.Tensor, requests: Sequence[SamplingRequest]) -> torch.Tensor:
        """One index per row of ``probs`` ``[B, V]`` (rows sum to about 1), drawn from that row by its
        inverse CDF: the first index whose cumulative mass (float64) exceeds ``u * total`` for one
        uniform ``u`` per row, from the row's own generator when its request is seeded, else from the
        engine's. One random number per row, where an exponential race draws one per vocabulary entry
        (docs/performance.md has the timings)."""
        uniform = torch.empty(probs.shape[0], 1, dtype=torch.float64, device=probs.device)
        unseeded = [i for i, r in enumerate(requests) if r.sampling_params.seed is None]
        if unseeded:
            uniform[unseeded] = torch.rand(len(unseeded), 1, dtype=torch.float64, device=probs.device,
                                           generator=self.generator)
        for i, r in enumerate(requests):
            if r.sampling_params.seed is not None:
                uniform[i] = torch.rand(1, dtype=torch.float64, device=probs.device,
                                        generator=self._request_generator(r))
        cdf = probs.to(torch.float64).cumsum_(dim=-1)
        choice = torch.searchsorted(cdf, uniform * cdf[:, -1:], right=True)[:, 0]
        # u * total rounding up to total itself would run past the end: take the row's likeliest token.
        past = choice >= probs.shape[1]
        return torch.where(past, probs.argmax(dim=-1), choice) if bool(past.any()) else choice

    @staticmethod
    def _top_k_top_p_probs(
        scaled: torch.Tensor, params: list[SamplingParams]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Probabilities in descending-logit order after top-k then top-p, plus that order.

        Top-k keeps the k best ranks; top-p then keeps the smallest prefix whose mass is >= p (the rank
        whose exclusive cumulative mass is already >= p is dropped; rank 0 is always kept).
        """
        vocab = scaled.shape[1]
        sorted_logits, order = scaled.sort(dim=-1, descending=True)
        ranks = torch.arange(vocab, device=scaled.device)[None, :]
        top_k = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=scaled.device)
        sorted_logits = sorted_logits.masked_fill(ranks >= top_k[:, None], float("-inf"))
        probs = torch.softmax(sorted_logits, dim=-1)
        top_p = torch.tensor([p.top_p for p in params], dtype=probs.dtype, device=scaled.device)
        exclusive = probs.cumsum(dim=-1) - probs
        drop = (exclusive >= top_p[:, None]) & (ranks > 0)
        probs = probs.masked_fill(drop, 0.0)
        return probs, order
