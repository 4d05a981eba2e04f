"""The Ray executor (``[executor] kind = "ray"``; ``evalkit run --executor ray``; extra ``evalkit[ray]``).

Each shard is one Ray task with ``cpus_per_task`` CPUs, retried up to ``max_retries`` times when
its worker dies or raises. A task works in ``work_dir/<shard>`` on the node that runs it and
resumes there on a retry (its call cache is kept: no completed call is sent again); it ships the
finished shard folder back as a tar archive, so the driver needs no storage shared with the nodes.
``address``: ``"auto"`` joins the running cluster (``ray start --head``), ``"ray://host:port"`` a
remote one, ``"local"`` starts a private instance; a Ray already initialised in this process is used.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from evalkit.common.progress import log
from evalkit.contracts.config import ExecutorConfig
from evalkit.pipeline.executors import EXECUTORS, run_shard_with_retries
from evalkit.pipeline.shard import MARKER, Shard


def _ray():
    try:
        import ray
    except ImportError:
        raise ValueError("the Ray executor needs Ray: pip install 'evalkit[ray]'") from None
    return ray


def _connect(settings: ExecutorConfig):
    ray = _ray()
    if not ray.is_initialized():
        addr = settings.address or "auto"
        kw = {
            "address": None if addr == "local" else addr,
            "ignore_reinit_error": True,
            "log_to_driver": False,
        }
        ray.init(**kw)
    return ray


def _shard_task(exp, shard: Shard, shard_dir: str, argv, warm) -> tuple[str, bytes]:
    """Runs on a Ray worker: the shard (resumed if an earlier attempt left work), then its folder as a tar."""
    d = run_shard_with_retries(exp, shard, Path(shard_dir), argv, retries=0, warm=warm)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(d, arcname=shard.name)
    return shard_dir, buf.getvalue()


def default_shards(settings: ExecutorConfig) -> int:
    ray = _connect(settings)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // max(1, int(settings.cpus_per_task)))


def run_ray(exp, shards: list[Shard], work_dir: Path, settings: ExecutorConfig, argv=None) -> list[Path]:
    ray = _connect(settings)
    task = ray.remote(_shard_task).options(
        num_cpus=float(settings.cpus_per_task),
        max_retries=settings.max_retries,
        retry_exceptions=True,
    )
    work_dir = Path(work_dir).resolve()
    warm = settings.warm_cache
    pending = {task.remote(exp, s, str(work_dir / s.name), argv, warm): s for s in shards}
    done: dict[int, Path] = {}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        shard = pending.pop(ready[0])
        remote_dir, blob = ray.get(ready[0])
        local = work_dir / shard.name
        if not (Path(remote_dir) / MARKER).is_file():  # ran on another node: unpack its folder here
            local.parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                tar.extractall(local.parent, filter="data")
        done[shard.index] = local
        log(f"ray: shard {shard} done ({len(done)}/{len(shards)})")
    return [done[s.index] for s in shards]


run_ray.default_shards = default_shards
EXECUTORS.add("ray", run_ray, "shards as Ray tasks (resources per task, retries); extra evalkit[ray]")
