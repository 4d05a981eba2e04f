"""The walking-skeleton report: run facts and a table of metric means per arm."""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalkit.models import is_offline_standin


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render_report(run_dir: str | os.PathLike) -> str:
    run = Path(run_dir)
    cfg = json.loads((run / "config.json").read_text())
    manifest = json.loads((run / "corpus" / "manifest.json").read_text())
    decision = json.loads((run / "decision.json").read_text())
    config = cfg["config"]
    model = config["model"]
    stats = manifest["stats"]
    standin = is_offline_standin(model["backend"])
    out = [f"# evalkit report: {config['name']}", ""]
    if standin:
        out += [
            f"> Summaries come from the offline stand-in backend `{model['backend']}` "
            "(extractive, deterministic), not from a language model.",
            "",
        ]
    cont = run / "continuation" / "manifest.json"
    if cont.exists():
        c = json.loads(cont.read_text())
        if c.get("proxy"):
            out += [
                f"> Continuation metrics ({', '.join(c['metrics'])}) come from the `{c['agent']}` agent: "
                "a proxy for information availability, not a model's behaviour.",
                "",
            ]
    out += [
        "## Run facts",
        "",
        _table(
            ["fact", "value"],
            [
                [
                    "corpus",
                    f"{manifest['kind']} ({', '.join(f'{k}: {v}' for k, v in stats['formats'].items())})",
                ],
                ["sessions", str(stats["sessions"])],
                ["messages", str(stats["messages"])],
                ["arms", ", ".join(config["replay"]["arms"])],
                [
                    "backend / model",
                    f"{model['backend']} / {model['model']}" + (" (offline stand-in)" if standin else ""),
                ],
                ["seed", str(config["seed"])],
                ["config hash", cfg["config_hash"][:12]],
                ["reproduce", f"`{cfg['command']}`"],
            ],
        ),
        "",
        "## Metrics",
        "",
        "Mean of per-session means; n is the number of sessions with a value.",
        "",
    ]
    rows = [
        [d["metric"], d["arm"], str(d["sessions"]), f"{d['mean']:.3f}", str(d["errors"])]
        for d in sorted(decision["summary"], key=lambda d: (d["metric"], d["arm"]))
    ]
    out.append(_table(["metric", "arm", "n sessions", "mean", "errors"], rows))
    out.append("")
    return "\n".join(out)


def write_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Write ``report.md`` into ``out_dir`` (default: the run's ``report/`` folder)."""
    out = Path(out_dir) if out_dir else Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.md"
    path.write_text(render_report(run_dir), encoding="utf-8")
    return path
