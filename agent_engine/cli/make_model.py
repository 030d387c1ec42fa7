"""``agent-engine make-model DIR``: write the embedded default model as an ordinary HF folder, or with
``--like NAME`` a random-weight checkpoint with a known model's layer shape (``sim.shaped_model``)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write the embedded default model (or a random model of a known shape) as an HF folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="output folder")
    parser.add_argument("--like", default=None,
                        help="a model the simulator knows (e.g. llama-3.1-8b): its layer shape, random weights")
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"),
                        help="weights of a --like model (default bfloat16)")
    parser.add_argument("--device", default="cpu", help="where --like weights are drawn (cpu or cuda)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.like is None:
        from agent_engine.model.default_model import build_default_model

        out = build_default_model(Path(args.dir))
        print(f"wrote the embedded default model to {out}")
        return 0
    from agent_engine.sim.shaped_model import build_shaped_model, shaped_config, vocab_note
    from agent_engine.sim.specs import get_model

    try:
        spec = get_model(args.like)
    except KeyError as exc:
        raise ValueError(str(exc)) from None
    out = build_shaped_model(Path(args.dir), spec, args.dtype, args.device)
    print(f"wrote a random {args.dtype} model shaped like {spec.name} to {out}; "
          f"{vocab_note(spec, shaped_config(spec, args.dtype))}")
    return 0
