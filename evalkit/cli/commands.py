"""CLI verbs. Each module here registers its verbs; ``load_all`` imports them for the parser."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.common.registry import Registry


@dataclass(frozen=True)
class Command:
    add_arguments: Callable
    handler: Callable


COMMANDS: Registry[Command] = Registry("command")

# One module per stage or concern; add a module here to add its verbs.
MODULES = [
    "core",
    "importers",
    "probes",
    "report",
    "models",
    "gate",
    "continuation",
    "calibrate",
    "plan",
    "facts",
    "scale",
    "judge_budget",
    "init",
]


def command(name: str, description: str):
    """Register ``fn(args) -> int`` as a verb; ``fn.arguments(parser)`` declares its options."""

    def deco(fn):
        COMMANDS.add(name, Command(getattr(fn, "arguments", lambda p: None), fn), description)
        return fn

    return deco


def arguments(adder: Callable):
    """Attach an argument-declaring function to a handler (apply below ``@command``)."""

    def deco(fn):
        fn.arguments = adder
        return fn

    return deco


def terminal_safe(text: str) -> str:
    """``text`` with control characters (terminal escape codes, newlines) shown as escapes, for
    printing data (session ids, file contents) to a terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def require_run_folders(*paths, marks: tuple[str, ...] = ("config.json",)) -> None:
    """Refuse what is not a run folder (:func:`evalkit.contracts.runs.run_folder`) before a verb
    imports the libraries its work needs: the report, decide and calibrate stacks cost a process
    about two seconds of imports (scipy, matplotlib), a refusal a fraction of that."""
    from evalkit.contracts.runs import run_folder

    for path in paths:
        run_folder(path, marks)


def load_all() -> None:
    for m in MODULES:
        importlib.import_module(f"evalkit.cli.{m}")
