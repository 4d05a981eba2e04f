"""``evalkit ARGS`` in the test's own process: :func:`evalkit.cli.main` with the process state a
fresh ``python -m evalkit`` would have where it matters to a test (working folder, environment,
stdout and stderr on files, not a terminal), and the same result shape as a subprocess.

A process costs ~1-2 s of CPU in imports alone (pandas, pyarrow, scipy); a test that only reads
what a command prints, writes and exits with needs none of it. Tests of what only a real process
shows (signals, Ctrl-C, kills, a closed pipe, what a command imports, memory, file locks between
processes, the installed entry point) keep :func:`tests.support.runs.evalkit`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path


@contextlib.contextmanager
def _fd_redirected(fd: int, target: int):
    """File descriptor ``fd`` pointed at ``target`` (what forked workers and native code write
    goes there too), restored after."""
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def _environment(env: dict[str, str] | None):
    if not env:
        yield
        return
    saved = dict(os.environ)
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR is read once per process; read it again
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = None


def run_cli(
    *args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``evalkit ARGS`` in-process: its exit code, stdout and stderr as text, as
    :func:`tests.support.runs.evalkit` returns them for a subprocess. An exception escaping
    :func:`evalkit.cli.main` is a traceback on stderr and exit 1, as the interpreter would make
    it, so a test asserting "no traceback" still sees one."""
    from evalkit.cli import main

    argv = [str(a) for a in args]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    here = os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.ExitStack() as stack:
        out_file = stack.enter_context(tempfile.TemporaryFile())
        err_file = stack.enter_context(tempfile.TemporaryFile())
        # The streams Python gives a process whose stdout and stderr are pipes.
        out = stack.enter_context(open(out_file.fileno(), "w", encoding="utf-8", closefd=False))
        err = stack.enter_context(
            open(err_file.fileno(), "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        )
        stack.enter_context(_environment(env))
        stack.enter_context(_fd_redirected(1, out_file.fileno()))
        stack.enter_context(_fd_redirected(2, err_file.fileno()))
        sys.stdout, sys.stderr = out, err
        try:
            if cwd is not None:
                os.chdir(cwd)
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's usage errors, a verb's sys.exit
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if e.code is not None and not isinstance(e.code, int):
                    print(e.code, file=sys.stderr)
            except BaseException:  # what the interpreter prints on the way out
                traceback.print_exc(file=sys.stderr)
                code = 1
            for stream in (out, err):
                with contextlib.suppress(ValueError, OSError):
                    stream.flush()
        finally:
            sys.stdout, sys.stderr = saved_streams
            os.chdir(here)
            for s, h in handlers.items():
                signal.signal(s, h)
        out_file.seek(0)
        err_file.seek(0)
        stdout = out_file.read().decode("utf-8", errors="replace")
        stderr = err_file.read().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(["evalkit", *argv], int(code or 0), stdout, stderr)
