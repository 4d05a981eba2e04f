"""evalkit.bytecode: the installed modules evalkit imports, compiled ahead where Python would not
cache them (PYTHONDONTWRITEBYTECODE)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from importlib.util import cache_from_source
from pathlib import Path

from evalkit.bytecode import _compile, imported_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_files_are_installed_sources_that_evalkit_loads():
    files = imported_files()
    roots = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    assert files and all(f.endswith(".py") and f.startswith(roots) for f in files)
    names = {Path(f).relative_to(r).as_posix() for f in files for r in roots if f.startswith(r)}
    assert {"pandas/__init__.py", "scipy/stats/__init__.py", "openai/__init__.py"} <= names
    assert not any(f.startswith(str(ROOT / "evalkit")) for f in files)  # the user's sources stay as they are


def test_compile_writes_the_cache_python_reads_and_skips_a_broken_file(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("X = 1\n")
    bad.write_text("def (:\n")
    assert _compile(str(good)) is True
    assert Path(cache_from_source(str(good))).is_file()
    assert _compile(str(bad)) is False
    assert not Path(cache_from_source(str(bad))).exists()


def test_nothing_to_do_where_python_caches_bytecode_itself():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-m", "evalkit.bytecode"], env=env, capture_output=True, text=True, check=True
    )
    assert "nothing to do" in out.stdout
