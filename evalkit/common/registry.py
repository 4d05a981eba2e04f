"""Named registries for every kind of plugin (candidates, probes, importers, backends, ...).

An entry is registered with a decorator next to its definition and carries a one-line
description, so listing commands (`evalkit candidates`, `evalkit probes`) read the registry
instead of a hand-kept table. Third-party entries come in through a Python entry-point group
named ``evalkit.<kind>``, loaded lazily the first time a name is not found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered component: its name, the object itself, and what it is for."""

    name: str
    obj: T
    description: str
    info: dict[str, Any] = field(default_factory=dict)


class UnknownName(KeyError):
    """A name that no entry and no entry point provides."""

    def __str__(self) -> str:  # KeyError quotes its message; this one reads as a sentence
        return str(self.args[0])


class Registry(Generic[T]):
    """A mapping from name to :class:`Entry`, filled by decorators and entry points."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}
        self._plugins_loaded = False

    def register(self, name: str, description: str, **info: Any) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name", "what it does", evidence=...)``."""

        def deco(obj: T) -> T:
            self.add(name, obj, description, **info)
            return obj

        return deco

    def add(self, name: str, obj: T, description: str, **info: Any) -> None:
        if name in self._entries and self._entries[name].obj is not obj:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = Entry(name, obj, description, info)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=f"evalkit.{self.kind}"):
            if ep.name not in self._entries:
                obj = ep.load()
                desc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
                self.add(ep.name, obj, desc[0] if desc else f"plugin from {ep.value}", plugin=ep.value)

    def entry(self, name: str) -> Entry[T]:
        if name not in self._entries:
            self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r} (known: {known})") from None

    def get(self, name: str) -> T:
        return self.entry(name).obj

    def __contains__(self, name: str) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        self._load_plugins()
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        return [e.name for e in self]
