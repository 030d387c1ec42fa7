"""Plug our paged attention into transformers 5.x model classes (Llama, Qwen2, Mistral, ...).

The runner calls the decoder with a packed batch ``input_ids [1, T]``, explicit ``position_ids``,
``use_cache=False`` and two extra forward kwargs that HF passes down to every attention call:

* ``ae_attn_metadata``: the step's :class:`kernels.AttentionMetadata`;
* ``ae_kv_caches``: ``list[(k_cache, v_cache)]`` indexed by ``module.layer_idx``.

Each layer first writes this step's K/V for the whole batch, then attends, so a request can read
blocks another request of the same step has just written (prefix-cache hits rely on that).

No O(T^2) mask is ever built: transformers' ``create_causal_mask`` returns ``None`` early for any
attention implementation that is not registered in ``AttentionMaskInterface`` (see
``transformers.masking_utils._preprocess_mask_arguments``), and we deliberately do not register one.
"""

from __future__ import annotations

import contextlib

import torch
from transformers import AttentionInterface

from kernels import AttentionMetadata, paged_attention, write_kv_cache

ATTN_IMPLEMENTATION = "agent_engine_paged"
METADATA_KWARG = "ae_attn_metadata"
KV_CACHES_KWARG = "ae_kv_caches"


def paged_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """HF attention-function signature: ``query [1, Hq, T, D]``, ``key/value [1, Hk, T, D]`` after rotary.

    Returns ``([1, T, Hq, D], None)``. Raises if our kwargs are missing, or for features we do not
    implement (softcap; a sliding window shorter than the longest sequence in the batch).
    """
    metadata = kwargs.get(METADATA_KWARG)
    kv_caches = kwargs.get(KV_CACHES_KWARG)
    if not isinstance(metadata, AttentionMetadata) or kv_caches is None:
        raise RuntimeError(
            f"{ATTN_IMPLEMENTATION} attention needs the forward kwargs {METADATA_KWARG} and {KV_CACHES_KWARG}"
        )
    if query.shape[0] != 1:
        raise ValueError(f"{ATTN_IMPLEMENTATION} expects a packed batch of shape [1, T], got {query.shape[0]}")
    if softcap:
        raise NotImplementedError("attention logit softcapping is not supported")
    if sliding_window is not None and metadata.max_seq_len > sliding_window:
        raise NotImplementedError(
            f"sliding window {sliding_window} shorter than a sequence ({metadata.max_seq_len}) is not supported"
        )
    k_cache, v_cache = kv_caches[module.layer_idx]  # type: ignore[index]
    q = query[0].transpose(0, 1)  # [T, Hq, D]
    k = key[0].transpose(0, 1)
    v = value[0].transpose(0, 1)
    write_kv_cache(k, v, k_cache, v_cache, metadata.slot_mapping)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = paged_attention(q, k, v, k_cache, v_cache, metadata, scale)
    return out.unsqueeze(0), None


def register_paged_attention() -> str:
    """Register :func:`paged_attention_forward` globally (idempotent); returns its implementation name."""
    AttentionInterface.register(ATTN_IMPLEMENTATION, paged_attention_forward)
    return ATTN_IMPLEMENTATION


def use_paged_attention(model: torch.nn.Module) -> None:
    """Register our attention and switch ``model`` (a ``PreTrainedModel``) to it."""
    name = register_paged_attention()
    set_impl = getattr(model, "set_attn_implementation", None)
    if set_impl is not None:
        set_impl(name)
    else:
        model.config._attn_implementation = name  # type: ignore[union-attr]
    if model.config._attn_implementation != name:  # type: ignore[union-attr]
        raise RuntimeError(f"{type(model).__name__} refused attention implementation {name!r}")


def sdpa_backends(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """The scaled-dot-product backends a forward on ``device`` may use. On CUDA: flash, memory-efficient
    and math, not cuDNN's, which builds a graph for every new query/key length; an engine's chunk
    lengths change every step. On CPU: torch's own choice."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
