"""Shared fixtures. Files from ../shared/ are read when present, never copied into the repo."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

# pytest rewrites every test module's asserts on import and keeps the result beside it
# (__pycache__, ignored by git), unless bytecode writing is off: where PYTHONDONTWRITEBYTECODE is set
# (the Makefile compiles sources for such machines), each xdist worker rewrote all ~110 test modules
# on every run, about a quarter of its collection. Only this process: the `evalkit` processes the
# tests start keep the setting.
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside the checkout; a git worktree one level deeper finds it further up.
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "transcripts").is_dir()), ROOT.parent / "shared")
TRANSCRIPTS = SHARED / "transcripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# What makes a test "whole" (left out of `make test-fast`): it starts a server, a subprocess, Ray,
# a browser, or a pipeline stage over a corpus, itself or through a fixture it uses.
WHOLE_FIXTURES = {"fake_server", "fake_server_process"}
WHOLE_CALLS = (
    "subprocess", "evalkit_cmd", "evalkit(", "run_cli(", "run_experiment(", "replay_corpus(", "score_run(",
    "build_corpus(", "run_continuation(", "worker_pool(", "import ray", '"run"', "FakeServer(",
    "write_report(", "merge_shards(", "sys.executable", "Browser(", "stage_corpus(", "stage_replay(",
    "stage_continuation(",
)


@functools.cache  # 800 tests share a few hundred functions and fixtures; tokenizing each once
def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _is_whole(item) -> bool:
    if WHOLE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        funcs += [d.func for d in defs if "_pytest" not in getattr(d.func, "__module__", "")]
    return any(call in _source(fn) for fn in funcs if fn is not None for call in WHOLE_CALLS)


# ``make test`` runs ``--dist loadgroup``: each test is its own unit of work, handed to whichever
# worker is free, except the tests sharing a module- or session-scoped fixture of ours (a finished
# run, a replayed corpus), which go to one worker together so the fixture is built once. A group
# holds at most SHARED_FIXTURE_GROUP tests, so one long module cannot keep a worker busy alone
# while the other idles (each further group builds its fixture again).
SHARED_FIXTURE_GROUP = 20
# Shared fixtures cheap enough to build once per worker (a browser launch, about a second): the
# tests using them are not grouped for them, so two long viewer tests can run side by side.
CHEAP_SHARED_FIXTURES = {"browser"}


def _shared_fixtures(item) -> tuple[str, ...]:
    """Names of the module-, package- or session-scoped fixtures defined in tests/ that ``item`` uses."""
    info = getattr(item, "_fixtureinfo", None)
    names = []
    for name, defs in (info.name2fixturedefs.items() if info else ()):
        d = defs[-1]
        if (
            d.scope != "function"
            and getattr(d.func, "__module__", "").startswith("tests")
            and name not in CHEAP_SHARED_FIXTURES
        ):
            names.append(name)
    return tuple(sorted(names))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(items):
    """Mark whole-run tests ``whole`` (see WHOLE_CALLS); group the tests sharing a costly fixture
    (see SHARED_FIXTURE_GROUP); then run the modules holding ``slow`` tests first, their slow tests
    first within them.

    ``make test`` spreads the tests over two workers; the run ends when the last long test does.
    Collected late, a 70-second test ran near the end with the other core mostly idle. Longest
    first is the usual fix for that; loadgroup hands out the largest groups first, then the single
    tests in this order. The sort is stable: ties keep the collection's order."""
    for item in items:
        if _is_whole(item):
            item.add_marker(pytest.mark.whole)
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.module.__name__, i)

    def key(item):
        module = item.module.__name__
        return (module not in slow_modules, first_seen[module], item.get_closest_marker("slow") is None)

    items.sort(key=key)
    grouped: dict[str, int] = {}
    for item in items:
        if _shared_fixtures(item):
            module = item.module.__name__
            k = grouped[module] = grouped.get(module, -1) + 1
            item.add_marker(pytest.mark.xdist_group(f"{module}-shared-{k // SHARED_FIXTURE_GROUP}"))


class _GroupInNodeId:
    """Puts each ``xdist_group`` in the node id (``...::test@group``), which is all loadgroup's
    scheduler sees, where xdist's own hook did not.

    xdist (3.8) sets the old ``item._nodeid`` attribute; pytest 9.2 derives the node id from
    ``item._id`` instead, so no test had a group: the tests sharing a module's run were spread
    over both workers, and each worker built that run again (the sharded runs of
    test_shards_and_merge.py twice). Where xdist's suffix is there, nothing is done."""

    @pytest.hookimpl(trylast=True)  # after xdist's own hook
    def pytest_collection_modifyitems(self, config, items):
        if not getattr(config.option, "loadgroup", False):  # set in xdist workers under loadgroup
            return
        try:
            from _pytest.nodeid import NodeId
        except ImportError:  # an older pytest, where xdist's own suffix works
            return
        for item in items:
            marks = item.iter_markers("xdist_group")
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
            nodeid = item.nodeid
            if names and nodeid.rfind("@") <= nodeid.rfind("]") and hasattr(item, "_id"):
                item._id = NodeId.parse(f"{nodeid}@{'_'.join(names)}")


def pytest_configure(config):
    config.pluginmanager.register(_GroupInNodeId(), "evalkit-xdist-group-in-node-id")


def _checkout_state() -> str | None:
    """``git status --porcelain`` of the checkout (untracked files included), or None outside git."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller only, not each xdist worker
        session.config.stash[_BEFORE] = _checkout_state()


def pytest_sessionfinish(session, exitstatus):
    """Tests write into tmp_path: a suite that changed the checkout fails, naming what changed."""
    if hasattr(session.config, "workerinput") or _BEFORE not in session.config.stash:
        return
    before, after = session.config.stash[_BEFORE], _checkout_state()
    if before is None or after is None or before == after:
        return
    changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the tests changed the checkout (git status --porcelain before/after differs):", *changed]
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True, bold=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[str | None]()


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; tests using it skip cleanly where it is absent."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    return TRANSCRIPTS


@pytest.fixture(scope="session")
def shared_tiny_run(tmp_path_factory) -> Path:
    """One finished tiny offline run per test worker (tests/support/runs.py:finished_tiny_run:
    2 sessions, 2 arms, continuation on), shared by every test that asks for it: read it in
    place, or copy it first (``copy_run``) to change it. ``exp.toml`` is beside it."""
    from tests.support.runs import finished_tiny_run

    return finished_tiny_run(tmp_path_factory.mktemp("shared-tiny-run"))


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
    never inherit the server's threads); killed when the test ends, or earlier by
    ``fake_server_process.stop(url)`` (to serve its port again with other options:
    ``"--port", port``)."""
    import subprocess
    import sys

    procs = {}

    def start(*args: str):
        log = tmp_path / f"fake-server-proc-{len(procs)}.jsonl"
        p = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "fake-server", "--log", str(log), *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        url = p.stdout.readline().strip()
        procs[url or f"failed-{len(procs)}"] = p
        assert url.startswith("http://127.0.0.1:"), url
        return url, log

    def stop(url: str) -> None:
        p = procs[url]
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=10)

    start.stop = stop
    yield start
    for url in procs:
        stop(url)
