"""``agent-engine make-model DIR``: write the embedded default model as an ordinary HF folder."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write the embedded default model as an HF folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="output folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent_engine.model.default_model import build_default_model

    out = build_default_model(Path(args.dir))
    print(f"wrote the embedded default model to {out}")
    return 0
