"""Named registries for every kind of plugin (candidates, probes, importers, backends, ...).

An entry is registered with a decorator next to its definition and carries a one-line
description, so listing commands (`evalkit candidates`, `evalkit probes`) read the registry
instead of a hand-kept table. A registry names its built-ins lazily, ``{"name": "module:object"}``:
a built-in's module is imported the first time its name is looked up (or the registry is listed),
never for its side effects at import time, so importing a registry imports none of its entries.
Third-party entries come in through a Python entry-point group named ``evalkit.<kind>``, loaded
the first time a name is neither registered nor built in.
"""

from __future__ import annotations

import importlib
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

    def __init__(self, kind: str, builtins: dict[str, str] | None = None):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}
        #: name -> "module:object"; the module registers the entry (its decorator) when imported
        self._builtins = dict(builtins or {})
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

    def _load_builtin(self, name: str) -> None:
        ref = self._builtins.get(name)
        if ref is None or name in self._entries:
            return
        module, _, attr = ref.partition(":")
        loaded = importlib.import_module(module)
        if name in self._entries:  # its decorator (or register call) ran on import
            return
        obj = getattr(loaded, attr)
        if name not in self._entries:  # defined without the registry's decorator
            desc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
            self.add(name, obj, desc[0] if desc else ref)

    def _load_all(self) -> None:
        for name in self._builtins:
            self._load_builtin(name)
        self._load_plugins()

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=f"evalkit.{self.kind}"):
            if ep.name not in self._entries and ep.name not in self._builtins:
                obj = ep.load()
                desc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
                self.add(ep.name, obj, desc[0] if desc else f"plugin from {ep.value}", plugin=ep.value)

    def entry(self, name: str) -> Entry[T]:
        if name not in self._entries:
            self._load_builtin(name)
        if name not in self._entries:
            self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted({*self._entries, *self._builtins})) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r} (known: {known})") from None

    def get(self, name: str) -> T:
        return self.entry(name).obj

    def __contains__(self, name: str) -> bool:
        if name in self._entries or name in self._builtins:
            return True
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        self._load_all()
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        return [e.name for e in self]
