"""Shared fixtures. Files from ../shared/ are read when present, never copied into the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside the checkout; a git worktree one level deeper finds it further up.
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "transcripts").is_dir()), ROOT.parent / "shared")
TRANSCRIPTS = SHARED / "transcripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(items):
    """Run the modules holding ``slow`` tests first, their slow tests first within them.

    ``make test`` spreads the tests over two workers; the run ends when the last long test does.
    Collected late, a 70-second test ran near the end with the other core mostly idle. Longest
    first is the usual fix for that. A module stays in one piece, so its module-scoped fixtures
    are still built once per worker. The sort is stable: ties keep the collection's order.
    """
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.module.__name__, i)

    def key(item):
        module = item.module.__name__
        return (module not in slow_modules, first_seen[module], item.get_closest_marker("slow") is None)

    items.sort(key=key)


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; tests using it skip cleanly where it is absent."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    return TRANSCRIPTS


# -- the fake OpenAI-compatible server (evalkit.testing.fakeserver) ---------------------------------
@pytest.fixture
def fake_server(tmp_path):
    """Factory: ``fake_server(plan=FaultPlan(...), script=[...])`` starts a real HTTP server on
    127.0.0.1 (a free port) in this process, logging to ``tmp_path/fake-server-N.jsonl``; every
    server is stopped when the test ends."""
    from evalkit.testing.fakeserver import FakeServer

    servers = []

    def start(plan=None, script=None, **kw):
        kw.setdefault("log_path", tmp_path / f"fake-server-{len(servers)}.jsonl")
        s = FakeServer(plan, script, **kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def fake_server_process(tmp_path):
    """Factory: ``url, log = fake_server_process("--fault", "429=0.1", ...)`` runs
    ``evalkit fake-server`` in a subprocess (so worker processes forked by the code under test
    never inherit the server's threads); killed when the test ends."""
    import subprocess
    import sys

    procs = []

    def start(*args: str):
        log = tmp_path / f"fake-server-proc-{len(procs)}.jsonl"
        p = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "fake-server", "--log", str(log), *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(p)
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        return url, log

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
