"""The ``agent-engine`` command line: a registry of subcommands, each built only when it is chosen.

Invariants:
- ``agent-engine --help`` imports no built-in command module and no torch or transformers: the top
  level lists the registry's names and one-line helps (a plugin's help is its module's ``HELP``, so
  a plugin module keeps its top level light).
- A command is a module with ``add_arguments(parser)``, which adds its flags (or its own
  subcommands) and sets ``func`` (called as ``args.func(args)``; returns the exit status). The
  module imports only what argument parsing needs; heavy imports happen inside ``func``. A
  ``ValueError`` out of ``func`` is bad input: one line on stderr and exit status 2, no traceback.
- Commands of other packages plug in through the ``agent_engine.commands`` entry-point group
  (``name = "package.module"``; the benchmarks register ``demo`` and ``bench`` this way), so this
  package never imports them by name. An entry point that fails to load is an error, never skipped.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "agent_engine.commands"


@dataclass(frozen=True)
class Command:
    name: str
    module: str
    help: str


BUILTIN_COMMANDS: tuple[Command, ...] = (
    Command("serve", "agent_engine.server.serve", "OpenAI-compatible HTTP server"),
    Command("generate", "agent_engine.cli.generate", "offline generation for a few prompts"),
    Command("make-model", "agent_engine.cli.make_model", "write the embedded default model as an HF folder"),
    Command("trace", "agent_engine.workloads.cli", "agent traces: synthesize from a profile, fit a profile"),
    Command("replay", "agent_engine.workloads.replay_cli", "replay a trace against a server as agent jobs"),
    Command("agent", "agent_engine.agent.cli", "run live shell-agent jobs against a server"),
    Command("estimator", "agent_engine.cli.estimator", "tool-latency estimator: fit the learned model"),
    Command("sim", "agent_engine.sim.cli", "simulate policies at GPU scale on the real scheduler"),
)


def plugin_commands() -> tuple[Command, ...]:
    """Commands registered by installed packages under ``ENTRY_POINT_GROUP`` (sorted by name)."""
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.append(Command(ep.name, ep.value, _first_doc_line(ep.value)))
    return tuple(sorted(found, key=lambda c: c.name))


def _first_doc_line(module: str) -> str:
    """The help of a plugin command: the module's ``HELP`` string, read without importing heavy code."""
    return getattr(importlib.import_module(module), "HELP", "")


def all_commands() -> dict[str, Command]:
    return {c.name: c for c in (*BUILTIN_COMMANDS, *plugin_commands())}


def top_parser(commands: dict[str, Command]) -> argparse.ArgumentParser:
    """The top-level parser: lists the commands; parsing with it only reports help or an unknown name."""
    ap = argparse.ArgumentParser(prog="agent-engine", description="LLM serving engine for agent workloads")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in commands.values():
        sub.add_parser(c.name, help=c.help, add_help=False)
    return ap


def command_parser(command: Command) -> argparse.ArgumentParser:
    """The parser of one command, with its module's arguments (importing that module only)."""
    parser = argparse.ArgumentParser(prog=f"agent-engine {command.name}", description=command.help)
    importlib.import_module(command.module).add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    commands = all_commands()
    if not args_in or args_in[0] not in commands:
        top_parser(commands).parse_args(args_in)  # prints help or the error, and exits
        return 2
    args = command_parser(commands[args_in[0]]).parse_args(args_in[1:])
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:  # bad input (a model, a trace, a flag's value): a message, not a traceback
        print(f"agent-engine {args_in[0]}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
