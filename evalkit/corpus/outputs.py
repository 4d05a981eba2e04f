"""What the synthetic sessions' tools print and the names they use: source files, pytest runs,
type-check reports, build errors, and the grep/ls/git/log lines other outputs are assembled from.

Written for the generator only (nothing here is shared with the stand-ins or the probes). Output
lengths are chosen by the generator (:mod:`evalkit.corpus.synth`); these functions fill them.
"""

from __future__ import annotations

import math
import random

MODULES = [
    "api",
    "auth",
    "billing",
    "cache",
    "cli",
    "config",
    "db",
    "events",
    "export",
    "http",
    "jobs",
    "ledger",
    "mailer",
    "metrics",
    "models",
    "parser",
    "queue",
    "reports",
    "search",
    "storage",
    "sync",
    "tasks",
    "tokens",
    "users",
    "webhooks",
]
VERBS = [
    "load",
    "parse",
    "build",
    "render",
    "validate",
    "sync",
    "fetch",
    "store",
    "merge",
    "resolve",
    "apply",
    "flush",
    "encode",
    "decode",
    "retry",
    "schedule",
    "index",
    "compact",
    "migrate",
    "scan",
]
NOUNS = [
    "header",
    "record",
    "batch",
    "token",
    "payload",
    "window",
    "invoice",
    "session",
    "cursor",
    "page",
    "schema",
    "row",
    "event",
    "chunk",
    "ledger",
    "digest",
    "profile",
    "quota",
    "report",
    "entry",
]


def _functions(rng: random.Random, module: str, n: int = 48) -> list[str]:
    """A pool of plausible Python functions; files are assembled from it (generation speed matters:
    the default corpus is ~600 MB)."""
    pool = []
    for _ in range(n):
        v, n_ = rng.choice(VERBS), rng.choice(NOUNS)
        k = rng.randint(2, 9)
        pool.append(
            f"\n\ndef {v}_{n_}(items, *, limit={k * 50}):\n"
            f'    """{v.capitalize()} each {n_} and return the ones that pass."""\n'
            f"    out = []\n    for i, item in enumerate(items):\n"
            f"        if i >= limit:\n            log.warning('{n_} limit %d reached', limit)\n            break\n"
            f"        value = item.get('{n_}_{k}')\n        if value is None:\n            continue\n"
            f"        out.append(_{v}_one(value, scale={k}))\n    return out\n"
        )
    return pool


def _code(rng: random.Random, module: str, target_chars: int, pool: list[str]) -> str:
    """A plausible Python source file of about ``target_chars``, assembled from ``pool``."""
    head = (
        f'"""The {module} module."""\n\nfrom __future__ import annotations\n\nimport logging\n\n'
        f"log = logging.getLogger(__name__)\n"
    )
    avg = sum(map(len, pool)) / len(pool)
    return head + "".join(rng.choices(pool, k=max(1, round(target_chars / avg))))


def _pytest_output(
    rng: random.Random, module: str, passed: int, failed: int, late: bool, src: str = ""
) -> str:
    """pytest output; ``late`` puts enough tracebacks before the tally to push it past char 2,000."""
    head = (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0\n"
        f"rootdir: /workspace/proj\nconfigfile: pyproject.toml\ncollected {passed + failed} items\n\n"
    )
    dots = "".join("F" if i < failed else "." for i in range(passed + failed))
    rng.shuffle(lst := list(dots))
    body = f"tests/test_{module}.py {''.join(lst)}  [100%]\n"
    if not late:  # a verbose run: one line per test, as `pytest -v` prints them
        want = rng.randint(350, 1_900)
        k = 0
        while len(head) + len(body) < want:
            k += 1
            body += f"tests/test_{module}.py::test_{rng.choice(VERBS)}_{k} PASSED\n"
    tb = ""
    if failed:
        tb = "\n=================================== FAILURES ===================================\n"
        for i in range(failed):
            v, n = rng.choice(VERBS), rng.choice(NOUNS)
            frames = rng.randint(1, 3) if late else 1
            tb += f"____________________________ test_{v}_{n}_{i} ____________________________\n\n"
            for f in range(frames):
                tb += (
                    f"    def test_{v}_{n}_{i}():\n        items = make_{n}s({f + 3})\n"
                    f">       assert {v}_{n}(items) == expected_{n}s\n"
                    f"E       AssertionError: assert [{{'{n}': {f}}}] == [{{'{n}': {f + 1}}}]\n"
                    f"{src or f'src/{module}/core.py'}:{40 + 7 * f}: in {v}_{n}\n"
                )
            tb += f"tests/test_{module}.py:{20 + i}: AssertionError\n"
        tb += "=========================== short test summary info ============================\n"
        tb += "".join(
            f"FAILED tests/test_{module}.py::test_case_{i} - AssertionError\n" for i in range(failed)
        )
    parts = [f"{failed} failed"] if failed else []
    parts.append(f"{passed} passed")
    tail = f"========================= {', '.join(parts)} in {rng.uniform(0.2, 9):.2f}s =========================\n"
    out = head + body + tb
    if late:
        # Warnings summary sits between the tracebacks and the tally, as pytest prints it.
        while len(out) < rng.randint(2_100, 9_000):
            out += (
                f"tests/test_{module}.py::test_{rng.choice(VERBS)}\n  /workspace/proj/src/{module}/compat.py:"
                f"{rng.randint(10, 300)}: DeprecationWarning: {rng.choice(NOUNS)} is deprecated\n"
            )
    return out + tail


def _lint_tail(rng: random.Random, module: str) -> str:
    lines = []
    for _ in range(rng.randint(40, 120)):
        lines.append(
            f"src/{module}/{rng.choice(NOUNS)}.py:{rng.randint(1, 400)}:{rng.randint(1, 80)}: "
            f"note: {rng.choice(VERBS)} '{rng.choice(NOUNS)}' may be simplified  [misc]"
        )
    return (
        "\n--- mypy ---\n" + "\n".join(lines) + f"\nFound {len(lines)} notes in {rng.randint(3, 9)} files\n"
    )


_BUILD_ERRORS = [
    (
        "npm run build",
        "src/{m}/index.ts:{k}:7 - error TS2339: Property '{n}' does not exist on type 'Options'.\n"
        "\nFound 1 error in src/{m}/index.ts:{k}\n",
        2,
        "src/{m}/index.ts",
    ),
    (
        "python scripts/migrate_{n}.py",
        'Traceback (most recent call last):\n  File "scripts/migrate_{n}.py", line {k},'
        " in <module>\n    from {m}.models import {N}\nImportError: cannot import name '{N}' from '{m}.models'\n",
        1,
        "scripts/migrate_{n}.py",
    ),
    (
        "cargo build",
        "error[E0425]: cannot find value `{n}` in this scope\n --> src/{m}.rs:{k}:9\n"
        "error: could not compile `{m}` due to 1 previous error\n",
        101,
        "src/{m}.rs",
    ),
    (
        "make docs",
        "sphinx-build -W docs _build\nWarning, treated as error:\ndocs/{m}.rst:{k}: ERROR: Unknown target "
        'name: "{n}".\nmake: *** [Makefile:12: docs] Error 2\n',
        2,
        "docs/{m}.rst",
    ),
]


def _lognormal(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, 10 ** (math.log10(median) + sigma * rng.gauss(0, 1)))))


def _lines_pool(rng: random.Random, module: str) -> list[str]:
    """Lines that grep/ls/git/other tools print, assembled into outputs of any length."""
    pool = []
    for _ in range(160):
        n, v = rng.choice(NOUNS), rng.choice(VERBS)
        pool.append(
            rng.choice(
                [
                    f"src/{module}/{n}.py:{rng.randint(1, 400)}:    {v}_{n}(items, limit={rng.randint(1, 9) * 50})",
                    f" M src/{module}/{n}.py",
                    f"{rng.randint(1, 30)} files changed, {rng.randint(1, 400)} insertions(+), {rng.randint(0, 90)} deletions(-)",
                    f"drwxr-xr-x  {rng.randint(2, 9)} dev dev 4096 Oct {rng.randint(1, 28)} {n}",
                    f"2026-10-{rng.randint(10, 28)}T{rng.randint(0, 23):02d}:00:00Z INFO {module}: {v} {n} ok",
                    f"- [ ] {v.capitalize()} the {n} in {module}",
                ]
            )
        )
    return pool


def _text_of(rng: random.Random, pool: list[str], chars: int) -> str:
    avg = sum(map(len, pool)) / len(pool) + 1
    text = "\n".join(rng.choices(pool, k=max(1, round(chars / avg) + 1)))
    cut = text.rfind("\n", 0, chars)
    return (text[:cut] if cut > 0 else text[:chars]) + "\n"
