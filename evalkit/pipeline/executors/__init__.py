"""Executors: where a run's shards run. One small interface, registered by name.

An executor is ``fn(exp, shards, work_dir, settings, argv) -> list[Path]``: it runs every
:class:`~evalkit.pipeline.shard.Shard` of ``exp`` (the per-session stages, ``run_experiment(shard=…)``)
and returns the finished shard folders; :func:`evalkit.pipeline.merge.merge_shards` then builds the run
folder. ``local`` runs them one after the other in this process (each shard uses the stages' own
process pools); ``ray`` runs them as Ray tasks (:mod:`evalkit.pipeline.executors.ray`, extra ``evalkit[ray]``).

Settings come from ``[executor]`` (``kind``, ``address``, ``shards``, ``cpus_per_task``,
``max_retries``, ``work_dir``), which is left out of the config hash: where a run ran never
changes what it computes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from evalkit.common.progress import log
from evalkit.common.registry import Registry
from evalkit.contracts.config import ExecutorConfig
from evalkit.pipeline.shard import Shard, all_shards

EXECUTORS: Registry[Callable] = Registry(
    "executor",
    {"local": "evalkit.pipeline.executors:run_local", "ray": "evalkit.pipeline.executors.ray:run_ray"},
)

def settings_from(exp) -> ExecutorConfig:
    """The experiment's ``[executor]`` (validated with the config, :class:`ExecutorConfig`)."""
    return exp.config.executor


def get_executor(kind: str) -> Callable:
    return EXECUTORS.get(kind)


def run_shard_with_retries(exp, shard: Shard, shard_dir: Path, argv, retries: int, warm=()) -> Path:
    """One shard in this process; a failed attempt is resumed (its call cache and finished stages
    are kept, so no completed model call is sent again and nothing is counted twice). ``warm``:
    read-only caches copied into the shard's own first (``evalkit run --warm-cache``)."""
    from evalkit.pipeline.run import run_experiment

    if warm:
        from evalkit.models.backends import cache_path
        from evalkit.models.cache_merge import merge_caches
        from evalkit.pipeline.lock import run_lock

        with run_lock(shard_dir, "evalkit run --warm-cache"):  # never into a running shard's cache
            merge_caches(list(warm), cache_path(exp.config.model, shard_dir))

    for attempt in range(retries + 1):
        try:
            run_experiment(exp, shard_dir, argv, resume=True, shard=shard)
            return shard_dir
        except (Exception, SystemExit) as e:  # any failure of an attempt is retried, but a refusal
            if isinstance(e, SystemExit) or attempt == retries:
                raise
            log(f"shard {shard}: attempt {attempt + 1} failed ({type(e).__name__}: {e}); retrying")
    raise AssertionError("unreachable")


@EXECUTORS.register("local", "every shard in this process, one after the other")
def run_local(exp, shards: list[Shard], work_dir: Path, settings: ExecutorConfig, argv=None) -> list[Path]:
    retries, warm = settings.max_retries, settings.warm_cache
    return [run_shard_with_retries(exp, s, work_dir / s.name, argv, retries, warm) for s in shards]


def run_with_executor(
    exp,
    run_dir: str | os.PathLike | None,
    argv=None,
    kind: str | None = None,
    shards: int | None = None,
    warm: list[str] | None = None,
):
    """``evalkit run`` past one machine: run the shards on the executor, then merge into ``run_dir``.

    With one shard on the local executor this is the ordinary run. ``warm``: read-only caches
    each shard copies into its own (paths every node can read). Returns the run's ``RunPaths``."""
    from evalkit.pipeline.merge import merge_shards
    from evalkit.pipeline.run import RunPaths, default_run_dir, run_experiment

    settings = settings_from(exp)
    settings = settings.model_copy(update={"warm_cache": [os.path.abspath(w) for w in warm or ()]})
    kind = kind or settings.kind
    n = int(shards or settings.shards or 0)
    if kind == "local" and n <= 1:
        return run_experiment(exp, run_dir, argv)
    executor = get_executor(kind)
    root = Path(run_dir) if run_dir else default_run_dir(exp)
    work = Path(settings.work_dir) if settings.work_dir else root / "shards"
    if n <= 0:
        n = int(getattr(executor, "default_shards", lambda s: 2)(settings))
    log(f"executor {kind}: {n} shard(s) in {work}")
    done = executor(exp, all_shards(n), work, settings, argv)
    merge_shards(done, root, argv)
    return RunPaths(root)
