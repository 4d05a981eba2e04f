"""The pipeline: corpus → replay → score → decide → report, each stage writing into the run folder.

A run folder holds the resolved config and its hash, the corpus (sessions, facts, manifest),
events per arm, the metrics table, the decision and the report. Every stage only reads what the
earlier ones wrote; re-deciding and re-reporting call no model, and re-scoring calls one only for
model-judged probes, through the call cache (an unchanged run's re-score sends 0 requests).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from evalkit import pipeline
from evalkit.common.progress import log
from evalkit.common.redact import redact_text, redact_value
from evalkit.contracts.config import Experiment
from evalkit.contracts.records import CallStats, CorpusManifest, ModelUsage, RunConfig, Timings
from evalkit.contracts.runs import RunPaths, read_record, write_record
from evalkit.models.spending import spending
from evalkit.models.usage import INVOCATION_ENV
from evalkit.models.usage import summarize as summarize_usage
from evalkit.pipeline import markers as completion
from evalkit.pipeline.lock import run_lock
from evalkit.pipeline.plan import plan_before_run


def default_run_dir(exp: Experiment) -> Path:
    """``runs/<name>-<hash8>``: one folder per distinct resolved config."""
    return exp.root / "runs" / f"{exp.name}-{exp.hash[:8]}"


def shell_command(argv: list[str]) -> str:
    """``argv`` as one line a POSIX shell runs back to the same arguments: shell-quoted, and
    control characters (a newline in an arm name) written as ``$'\\n'`` so the line stays one."""

    def quote(a: str) -> str:
        if a.isprintable():
            return shlex.quote(a)
        body = "".join(
            c
            if c.isprintable() and c not in "\\'"
            else ("\\" + c if c in "\\'" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\U{ord(c):08x}")
            for c in a
        )
        return f"$'{body}'"

    return " ".join(quote(a) for a in argv)


def write_run_config(
    exp: Experiment, paths: RunPaths, argv: list[str], endpoints: list | None = None
) -> None:
    """The resolved config, its hash, the command that reproduces the run, and the endpoints it
    sends to (evalkit.pipeline.endpoints).

    Secrets are redacted (credentials in a ``base_url``, keys pasted into a value); the hash is
    of the config as given, so ``--resume`` still recognises it."""
    write_record(
        paths.root,
        RunConfig,
        {
            "config": redact_value(exp.config.dump()),
            "config_hash": exp.hash,
            "source": exp.source,
            "command": redact_text(shell_command(["evalkit", *argv])),
            "endpoints": [e.to_dict() for e in endpoints or []],
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
    )


def stage_corpus(exp: Experiment, paths: RunPaths, shard=None) -> dict:
    from evalkit.corpus import build_corpus

    section = exp.config.corpus
    src = exp.resolve_path(section.path) if section.kind == "path" else None
    workers = exp.config.replay.workers
    return build_corpus(section, exp.seed, paths.corpus, src, workers, shard.holds if shard else None)


def check_unique_ids(path: Path, source: str | os.PathLike | None = None) -> None:
    """A corpus whose session ids repeat would mix two sessions' events: ValueError naming the
    file and the lines."""
    from evalkit.common.files import index_jsonl

    for sid, spans in index_jsonl(path, "id").items():
        if len(spans) > 1:
            lines = ", ".join(str(sp[2]) for sp in spans[:5])
            raise ValueError(
                f"{source or path}: session id {sid!r} appears on lines {lines}; ids must be unique"
            )


def stage_replay(exp: Experiment, paths: RunPaths, n_sessions: int) -> dict[str, int]:
    from evalkit.replay import replay_corpus

    model = exp.config.model
    # The call cache lives in the run folder unless the config shares one (docs/models.md).
    shared = model.cache_path
    model = model.model_copy(
        update={"cache_path": str(exp.resolve_path(shared) if shared else paths.root / "model-calls.sqlite")}
    )
    if model.batch:  # answer every summarizer round as a provider batch first (docs/models.md)
        from evalkit.replay.batch import batch_replay

        batch_replay(paths.corpus, paths.root, exp.config.replay, model)
    return replay_corpus(paths.corpus, paths.root, exp.config.replay, model, n_sessions)


def stage_score(exp: Experiment, paths: RunPaths, shard=None) -> int:
    from evalkit.score import score_run
    from evalkit.score.suite import find_suite

    stage_banks(exp, paths, shard)

    from evalkit.score import judge_budget

    suite = find_suite(exp.config.score.suite, exp.root)
    judge_budget.forget(paths.root)  # scored below at the suite's budget unless calibrated again
    if exp.config.score.judge_budget == "calibrate" and shard is not None:
        log(
            "score: judge budget not calibrated in a shard (it needs every session): `evalkit judge-budget` the merged run"
        )
    elif exp.config.score.judge_budget == "calibrate":  # on held-out sessions, before scoring
        cal, suite = judge_budget.calibrate(paths.root, suite)
        log("score: " + judge_budget.describe(cal))
    # The run id names the config, not the folder, so equal configs give byte-identical tables.
    return score_run(
        paths.root,
        list(exp.config.replay.arms),
        run_id=f"{exp.name}-{exp.hash[:8]}",
        suite=suite,
    )


def stage_banks(exp: Experiment, paths: RunPaths, shard=None) -> str | None:
    """Check and pin the experiment's probe banks (None without banks): before replay, so a
    mistyped glob or a bank about no session of the corpus fails before any model call. A shard
    holds some sessions only: there a bank about none of them is not an error."""
    from evalkit.score.banks import pin_banks

    patterns = exp.config.score.banks
    return pin_banks(list(patterns), exp.root, paths.root, shard is None) if patterns else None


def stage_continuation(exp: Experiment, paths: RunPaths) -> dict:
    from evalkit.continuation import run_continuation

    return run_continuation(
        paths.root,
        list(exp.config.replay.arms),
        exp.config.continuation,
        exp.config.model,
        run_id=f"{exp.name}-{exp.hash[:8]}",
    )


def write_model_call_stats(exp: Experiment, paths: RunPaths) -> dict | None:
    """``model-calls.json``: calls, tokens and cost from the run's call cache, for the report.

    Nothing is written when the run has no cache (the offline stand-in is computed, not cached):
    the report then says "n/a" rather than showing a count of zero calls."""
    from evalkit.models.backends import cache_path
    from evalkit.models.cache import CallCache

    path = cache_path(exp.config.model, paths.root)
    if not path or not Path(path).exists():
        return None
    st = CallCache(path).stats()
    out = {
        "calls": st.calls,
        "input_tokens": sum(r[3] for r in st.by_backend_model),
        "output_tokens": sum(r[4] for r in st.by_backend_model),
        "cost_usd": round(sum(r[5] for r in st.by_backend_model), 6),
        "by_backend_model": [
            {"backend": b, "model": m, "calls": n, "input_tokens": i, "output_tokens": o, "cost_usd": c}
            for b, m, n, i, o, c in st.by_backend_model
        ],
        "cache_file": str(path),
    }
    write_record(paths.root, CallStats, out)
    return out


def stage_health(exp: Experiment, paths: RunPaths) -> dict:
    from evalkit.decide.health import check_run
    from evalkit.decide.rules import resolve_rules

    # The rules the decide stage will use (the experiment's, else pyproject's): a verdict resting on
    # an unhealthy metric or an unusable exam is noted even when the experiment states no [rules].
    return check_run(paths.root, exp.config, resolve_rules(exp.config.rules, exp.root))


def stage_decide(exp: Experiment, paths: RunPaths) -> dict:
    from evalkit.decide import decide_run
    from evalkit.decide.calibrate import drop_stale_calibration
    from evalkit.decide.health import annotate_decision
    from evalkit.decide.rules import resolve_rules

    rules = resolve_rules(exp.config.rules, exp.root)
    decision = annotate_decision(paths.root, decide_run(paths.root, exp, rules))
    if drop_stale_calibration(paths.root, rules):
        log("decide: calibration.json was computed for other rules: removed (rerun evalkit calibrate)")
    return decision


def stage_report(exp: Experiment, paths: RunPaths, out: Path | None = None) -> Path:
    from evalkit.report import write_report

    return write_report(paths.root, out)


def prepare(exp: Experiment) -> Experiment:
    """``exp`` as the stages use it, every setting checked before any work: its prompt variants
    (evalkit.replay.variants), and its rules as the decide stage applies them (the project's
    extended by the experiment's own, :func:`evalkit.decide.rules.inherit_rules`), so a typo in a
    rule fails before the first model call, not after the last. Idempotent."""
    from evalkit.contracts.config import ConfigError
    from evalkit.decide.rules import RulesError, check_rule_names, inherit_rules, parse_rules, rules_table
    from evalkit.replay.variants import check_arm, check_variants

    replay = exp.config.replay
    try:
        check_variants(replay.variants)
        for arm in replay.arms:
            check_arm(arm, replay.variants)
        rules = inherit_rules(exp.config.rules, exp.root)
        check_rule_names(parse_rules(rules, f"{exp.source} [rules]"), list(replay.arms), replay.variants)
    except KeyError as e:  # the registry's "no such candidate" names the known ones
        raise ConfigError(f"{exp.source}: replay.arms: {e.args[0] if e.args else e}") from None
    except (RulesError, ValueError) as e:
        raise ConfigError(f"{exp.source}: {e}" if not str(e).startswith(exp.source) else str(e)) from None
    applied = rules_table(rules, f"{exp.source} [rules]")
    return Experiment(exp.config.model_copy(update={"rules": applied}), exp.source, exp.root)


def run_experiment(
    exp: Experiment,
    run_dir: str | os.PathLike | None = None,
    argv: list[str] | None = None,
    resume: bool = False,
    report_out: str | os.PathLike | None = None,
    shard=None,
    allow_remote: bool = False,
) -> RunPaths:
    """Run every stage; with ``resume`` a stage whose completion marker matches its inputs and
    outputs (evalkit.pipeline.markers) is not run again.

    The report goes to ``report_out`` when given (``make eval``: ``reports/<name>/``), else into
    the run folder's ``report/``; ``evalkit report RUN`` can always write it again. With ``shard``
    (:class:`evalkit.pipeline.shard.Shard`) only the per-session stages run, on that shard's sessions;
    ``evalkit merge`` then builds the run folder that decide and report read. Session content
    goes to a remote endpoint nobody named only with ``allow_remote`` (evalkit.pipeline.endpoints)."""
    from evalkit.pipeline.endpoints import check_endpoints

    exp = prepare(exp)  # every setting checked before any work (rules included)
    endpoints = check_endpoints(exp.config, allow_remote)
    default = default_run_dir(exp)
    paths = RunPaths(
        Path(run_dir) if run_dir else default.with_name(f"{default.name}-{shard.name}") if shard else default
    )
    # One writer per run folder: a second run stops here, naming the holder, before writing.
    with run_lock(paths.root, redact_text(shell_command(["evalkit", *(argv or ["run"])]))):
        # Tags this invocation's lines in the call ledger (workers inherit it).
        os.environ[INVOCATION_ENV] = f"{time.time():.6f}-{os.getpid()}"
        try:
            done = _run_in_folder(exp, paths, argv, resume, report_out, shard, endpoints)
        except BaseException:
            # Stopped (an error, Ctrl-C, SIGTERM): a half-written file is never resumed from, and
            # under the lock every *.tmp in the folder is this run's own.
            remove_partial_files(paths.root)
            # Written on the way out too; on a full disk the error to report is the first one.
            with contextlib.suppress(OSError):
                write_model_usage(paths)
            raise
        write_model_usage(paths)
        return done


def _drop_damaged_jsonl(path: Path) -> None:
    """Delete a JSONL file with a line that does not parse (a cut last line): the stage that
    owns it writes it again, where reading it would fail."""
    if not path.is_file():
        return
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                if raw.strip():
                    json.loads(raw)
            except ValueError:
                log(f"resume: {path} is damaged; it is written again")
                path.unlink()
                return


def remove_partial_files(root: Path) -> None:
    """Delete the ``*.tmp`` files a stopped run left in its folder (atomic writes not renamed)."""
    for p in root.rglob("*.tmp"):
        if p.is_file() or p.is_symlink():
            p.unlink(missing_ok=True)


def write_model_usage(paths: RunPaths) -> dict | None:
    """``model-usage.json``: what the model client sent, retried, failed and found in the cache
    during this run (evalkit.models.usage); written even when the run stops on an error."""
    usage = summarize_usage(paths.root)
    if usage is not None:
        write_record(paths.root, ModelUsage, usage)  # a full disk: an error naming the file
    return usage


def config_differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """``section.key old → new`` for every setting that differs between two resolved configs
    (``config.json`` tables, :meth:`ExperimentConfig.dump`), leaving out what the config hash
    leaves out (decide sections, spending keys, the executor)."""
    from evalkit.contracts.config import SPENDING_KEYS, UNHASHED_SECTIONS

    out = []
    for k in sorted(set(old) | set(new), key=str):
        if not prefix and k in UNHASHED_SECTIONS:
            continue
        if prefix == "model." and k in SPENDING_KEYS:
            continue
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k} {json.dumps(a, default=str)} → {json.dumps(b, default=str)}")
    return out


def check_folder(exp: Experiment, paths: RunPaths) -> None:
    """A run folder holds one config's results: a run of another config into it (fresh or resumed)
    is refused before anything is written, naming what differs. Another set of ship rules is the
    same config (the folder is re-decided)."""
    if not paths.config.exists():
        return
    from evalkit.contracts.runs import RunFolderError

    held = read_record(paths.root, RunConfig, required=True)
    old_hash, old_cfg = held.config_hash, held.config
    if not isinstance(old_hash, str):
        raise RunFolderError(f"{paths.config}: field 'config_hash': missing or not a string")
    if old_hash == exp.hash:
        return
    from evalkit.contracts.config import ConfigError, config_hash

    try:
        if isinstance(old_cfg, dict) and old_cfg and config_hash(old_cfg) == exp.hash:
            return  # written under an older hash rule (rules in the hash, spelled defaults): the same results
    except ConfigError:
        pass  # a config this version no longer reads: another config
    diff = config_differences(old_cfg, exp.config.dump()) if isinstance(old_cfg, dict) else []
    what = (
        "; ".join(diff[:4]) + (f"; {len(diff) - 4} more" if len(diff) > 4 else "")
        if diff
        else (f"config hash {old_hash[:8]} ≠ {exp.hash[:8]}")
    )
    raise ValueError(
        f"{paths.root}: holds the results of another config ({what}); "
        "use another --run-dir, or delete the folder to start over"
    )


def _run_in_folder(
    exp: Experiment, paths: RunPaths, argv, resume: bool, report_out, shard=None, endpoints=None
) -> RunPaths:
    """Check the folder holds no other config's results, write the run's config, then run the
    stages under the spending limits."""
    check_folder(exp, paths)
    write_run_config(exp, paths, argv or ["run"], endpoints)
    with spending(exp, paths):
        _run_stages(exp, paths, resume, report_out, shard)
    return paths


def _run_stages(exp: Experiment, paths: RunPaths, resume: bool, report_out, shard=None) -> None:
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name, fn, *args):
        start = time.perf_counter()
        out = fn(*args)
        pipeline.between_stages()
        timings[name] = round(time.perf_counter() - start, 3)
        return out

    # --resume skips a stage only when its completion marker matches (evalkit.pipeline.markers).
    def skip(stage: str, inputs: dict, outputs: list[Path]) -> bool:
        if not resume:
            completion.clear(paths.root, stage)
            return False
        why = completion.check(paths.root, stage, inputs, outputs)
        if why is None:
            log(f"resume: {stage} is complete, skipped")
            return True
        log(f"resume: {stage} runs again: {why}")
        completion.clear(paths.root, stage)
        return False

    base = {"config_hash": exp.hash}
    corpus_out = [paths.sessions, paths.facts, paths.manifest]
    corpus_section = exp.config.corpus
    corpus_in = dict(base, shard=shard.name) if shard else dict(base)
    if corpus_section.kind == "path" and corpus_section.path:
        corpus_in["source"] = completion.fingerprint(exp.resolve_path(corpus_section.path))
    if skip("corpus", corpus_in, corpus_out):
        manifest = read_record(paths.root, CorpusManifest, required=True).model_dump()
    else:
        manifest = timed("corpus", stage_corpus, exp, paths, shard)
        src = corpus_section.path if corpus_section.kind == "path" else None
        check_unique_ids(corpus_out[0], exp.resolve_path(src) if src else None)
        completion.mark(paths.root, "corpus", corpus_in, corpus_out, manifest["stats"])
    # Real models only: the report's planned vs actual calls. After the corpus stage (which calls
    # no model), so the plan samples the run's own corpus instead of building a second one, and a
    # shard's plan counts the shard's sessions.
    plan_before_run(exp, paths.root)
    n = manifest["stats"]["sessions"]
    log(
        f"corpus: {n} sessions, {manifest['stats']['messages']} messages, {manifest['stats']['bytes'] / 1e6:.1f} MB"
    )
    arms = list(exp.config.replay.arms)
    banks = stage_banks(exp, paths, shard)  # before replay: a bad bank fails before any summarizer call
    from evalkit.contracts.event import events_path

    events_out = [events_path(paths.root, a) for a in arms]
    from evalkit.replay.fingerprint import arm_fingerprints

    replay_in = {
        **base,
        "corpus": completion.fingerprint(corpus_out[0]),
        "commands": completion.command_files(arms),
        # Each arm's resolved policy and code: an edited candidate or prompt is replayed again.
        "arms": arm_fingerprints(arms, exp.config.replay.variants),
    }
    if not skip("replay", replay_in, events_out):
        counts = timed("replay", stage_replay, exp, paths, n)
        log("replay: " + ", ".join(f"{a}={c}" for a, c in counts.items()) + " events")
        completion.mark(paths.root, "replay", replay_in, events_out, counts)
    # Continuation rows are merged into metrics.parquet, so scoring and continuation are one stage.
    cont_on = exp.config.continuation.enabled
    # Every file the stage writes, so --resume notices damage to any of them (pinned judge
    # questions, the continuation log and table too, not only the merged table).
    cont_files = (paths.continuation_manifest.name, "log.jsonl", paths.continuation_metrics.name)
    from evalkit.contracts import aggregate, questions

    score_out = [
        paths.metrics,
        paths.corpus / "questions.jsonl",
        questions.path_of(paths.root),
        aggregate.path_of(paths.root),
    ] + ([paths.root / "continuation" / n for n in cont_files] if cont_on else [])
    score_in = {
        **base,
        "corpus": completion.fingerprint(corpus_out[0]),
        "events": completion.files(paths.root, events_out),
        "suite": completion.fingerprint(exp.resolve_path(exp.config.score.suite)),
        **({"banks": banks} if banks else {}),  # the pinned questions: an edited bank is graded again
        # The probes' and the continuation's code (the judge's prompts among them).
        "code": completion.package_source("evalkit.score", "evalkit.continuation"),
    }
    if not skip("score", score_in, score_out):
        if resume:
            # The stage merges its rows into the table there: a damaged one failed every resume.
            # It is rebuilt whole (continuation rows included, from the call cache).
            paths.metrics.unlink(missing_ok=True)
            _drop_damaged_jsonl(paths.corpus / "questions.jsonl")
        rows = timed("score", stage_score, exp, paths, shard)
        log(f"score: {rows} metric rows")
        if cont_on:
            cont = timed("continuation", stage_continuation, exp, paths)
            log(
                f"continuation: {cont['counts']['continuations']} continuations ({cont['label']}), {cont['rows']} rows"
            )
        # Once the table is whole (probe and continuation rows): what health, decide and report read.
        timed("aggregate", aggregate.write, paths.root)
        completion.mark(paths.root, "score", score_in, score_out, {"rows": rows})
    write_model_call_stats(exp, paths)
    write_model_usage(paths)
    if shard is not None:  # the rest reads every session: it runs after `evalkit merge`
        from evalkit.pipeline.shard import write_marker

        write_record(paths.root, Timings, timings)
        write_marker(paths.root, shard, exp.hash, [r["id"] for r in manifest["sessions"]], str(exp.root))
        return
    timed("health", stage_health, exp, paths)  # before deciding: health.json flags unusable metrics
    timed("decide", stage_decide, exp, paths)
    from evalkit.pipeline import warnings as run_warnings

    warnings = run_warnings.write(paths.root, exp.config)  # the report's first section reads it
    timings["total_before_report"] = round(time.perf_counter() - t0, 3)
    write_record(paths.root, Timings, timings)
    report = timed("report", stage_report, exp, paths, Path(report_out) if report_out else None)
    log(f"report: {report}")
    for line in run_warnings.summary_lines(warnings):
        print(line, file=sys.stderr)
