"""Helpers for the hardening tests: a tiny corpus, an experiment file, and `evalkit` as a real
subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from evalkit.common.tokens import message_tokens
from evalkit.contracts.session import tool_pairs_valid
from evalkit.corpus import write_sessions
from evalkit.corpus.synth import generate_session
from tests.conftest import ROOT
from tests.support.cli import run_cli

SUITE = ROOT / "probes" / "default.toml"


def tiny_corpus(out: Path, n: int = 2, tokens: int = 60_000, seed: int = 7) -> Path:
    """``n`` synthetic sessions cut after ~``tokens`` tokens at a turn boundary (a few
    compactions each at the test window)."""
    sessions = []
    for i in range(n):
        s = generate_session(seed, i)
        total, cut = 0, len(s.messages)
        for k, m in enumerate(s.messages):
            total += message_tokens(m)
            boundary = k + 1 < len(s.messages) and s.messages[k + 1].role == "assistant"
            if total > tokens and boundary and tool_pairs_valid(s.messages[: k + 1]):
                cut = k + 1
                break
        sessions.append(replace(s, messages=s.messages[:cut]))
    out.mkdir(parents=True, exist_ok=True)
    write_sessions(out / "sessions.jsonl", sessions)
    return out / "sessions.jsonl"


def verdict_script(folder: Path) -> Path:
    """A fake-server script whose judge replies parse (the echo reply is not a verdict, and an
    unparseable verdict would be scored as an error)."""
    import json

    from evalkit.score.judge import DIMENSIONS

    p = folder / "verdicts.json"
    verdict = {**dict.fromkeys(DIMENSIONS, 4), "rationale": "ok"}
    p.write_text(json.dumps([{"match": "expected_facts", "reply": json.dumps(verdict)}]))
    return p


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def write_experiment(path: Path, corpus: Path | None, *, model: dict | None = None, **sections) -> Path:
    """An experiment file: the tiny corpus (or synth), two arms, a small window, offline by
    default; ``model`` and ``sections`` (replay=..., continuation=...) override keys."""
    cfg: dict[str, dict] = {
        "corpus": {"kind": "path", "path": str(corpus)} if corpus else {"kind": "synth", "sessions": 2},
        "replay": {
            "arms": ["baseline", "head-tail"],
            "window": 40_000,
            "reserve": 4_000,
            "keep_recent": 5_000,
            "workers": 1,
        },
        "model": {"backend": "extractive", "model": "extractive-v1"},
        "score": {"suite": str(SUITE)},
        "continuation": {"enabled": False},
    }
    cfg["model"].update(model or {})
    for k, v in sections.items():
        cfg.setdefault(k, {}).update(v)
    lines = ['name = "hardening"', "seed = 7"]
    for section, table in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def evalkit_cmd(*args: str) -> list[str]:
    """The argv of ``python -m evalkit ARGS`` (for Popen: runs that are raced or killed)."""
    return [sys.executable, "-m", "evalkit", *args]


def evalkit(*args: str, env: dict | None = None, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """``python -m evalkit ARGS`` in a fresh process."""
    return subprocess.run(
        evalkit_cmd(*args),
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def finished_tiny_run(root: Path) -> Path:
    """A finished tiny offline run under ``root`` (``src/`` 2 sessions, ``exp.toml`` with 2 arms
    and continuation on, ``run/``), written by ``evalkit run`` (in-process) as a user runs it."""
    corpus = tiny_corpus(root / "src", n=2)
    exp = write_experiment(root / "exp.toml", corpus, continuation={"enabled": True})
    run = root / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), cwd=root)
    assert done.returncode == 0, done.stderr
    return run


def copy_run(base: Path, tmp_path: Path, name: str = "run") -> Path:
    """A copy of the run folder ``base`` (its lock left out) at ``tmp_path/name``, for a test
    that changes it."""
    dst = tmp_path / name
    shutil.copytree(base, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def cache_keys(path: Path, purpose: str | None = None) -> set[str]:
    """The keys of a call cache, read only, while another process may be writing it (none while
    the file or its table does not exist yet); ``purpose`` keeps one purpose's calls."""
    import sqlite3

    if not path.exists():
        return set()
    sql, args = (
        ("SELECT key FROM calls WHERE purpose = ?", (purpose,)) if purpose else ("SELECT key FROM calls", ())
    )
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return {r[0] for r in conn.execute(sql, args)}
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return set()


def facts_check(labels: Path, transcripts: Path) -> str:
    """What ``evalkit facts --check LABELS --transcripts DIR`` prints (in-process), asserting it
    exits 0."""
    done = run_cli("facts", "--check", str(labels), "--transcripts", str(transcripts))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def refused(done: subprocess.CompletedProcess, *names: str) -> str:
    """Assert a one-line refusal (exit 2, no traceback) naming every one of ``names``."""
    err = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], err[-2000:])
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("[evalkit]")]
    assert len(lines) == 1, err
    for n in names:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def starter_experiment(transcripts: Path, folder: str, work: Path, name: str = "mine") -> Path:
    """``evalkit init`` on a folder of real sessions under ``../shared/transcripts`` (the test is
    skipped when it is absent): the path of the starter experiment it wrote into ``work``."""
    import pytest

    sessions = transcripts / folder
    if not sessions.is_dir():
        pytest.skip(f"{sessions} not present")
    done = run_cli("init", str(sessions), "--out", str(work), "--name", name)
    assert done.returncode == 0, done.stderr
    return work / f"{name}.toml"
