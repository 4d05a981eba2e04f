"""Compile, once, the bytecode of every installed module evalkit imports (``make test`` runs it
after installing the dev extras).

Some machines set ``PYTHONDONTWRITEBYTECODE``. Python then never caches the bytecode it compiles,
and every process compiles each module it imports again: ~1,000 modules of pandas, scipy,
matplotlib, pyarrow and the openai SDK, ~5 s of CPU per process. The test suite starts hundreds of
processes (``evalkit`` subprocesses, fake servers, workers): on 2 cores it took 601 s before this
step and 414-461 s after (docs/scale.md).
Bytecode written ahead is read as usual: the variable only stops Python from writing it.

Only the environment's installed packages are compiled (the interpreter's own library ships
compiled; evalkit's sources are left as the user keeps them). Without the variable, Python caches
on first import by itself, and this does nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
import py_compile
import sys
import sysconfig
from concurrent.futures import ProcessPoolExecutor
from importlib.util import cache_from_source
from multiprocessing import get_context

# Imported inside the functions that use them (a command that needs none of them starts faster).
LAZY = ("openai", "aiohttp", "datasets", "tqdm")


def imported_files(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The installed packages' source files that importing every evalkit module loads, with
    :data:`LAZY` and the ``extra`` modules (such as ``ray``), each skipped when not installed."""
    import evalkit

    names = [m.name for m in pkgutil.walk_packages(evalkit.__path__, "evalkit.")]
    for name in [n for n in names if not n.endswith(".__main__")] + [*LAZY, *extra]:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed
            continue
    roots = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    files = {getattr(mod, "__file__", None) for mod in list(sys.modules.values())}
    return sorted(f for f in files if f and f.endswith(".py") and f.startswith(roots))


def _compile(path: str) -> bool:
    try:
        py_compile.compile(path, cfile=cache_from_source(path), doraise=True)
    except (OSError, py_compile.PyCompileError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m evalkit.bytecode [MODULE ...]``: MODULEs are imported too (see :func:`imported_files`)."""
    if not sys.flags.dont_write_bytecode:
        print("evalkit.bytecode: Python caches bytecode on first import here; nothing to do")
        return 0
    files = imported_files(sys.argv[1:] if argv is None else argv)
    # Spawned, not forked: this process has every library imported (and their threads).
    with ProcessPoolExecutor(mp_context=get_context("spawn")) as pool:
        done = sum(pool.map(_compile, files, chunksize=32))
    print(f"evalkit.bytecode: compiled {done} of {len(files)} installed modules evalkit imports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
