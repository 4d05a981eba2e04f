"""The cost plan: what a run will send, per arm and stage, before it sends anything.

The summarizer's requests come from a dry replay (``evalkit.replay.frontier.walk``) of a sample of
the corpus: the first round of every session is exact; later rounds depend on the summaries the
model writes, so the dry replay answers uncached requests with a stand-in summary of an assumed
length (the configured ``summary_max_tokens`` unless told otherwise) and cached ones with the
cached answer. The judge's requests are built from the dry events with the judge probe's own
request builders; the continuation agent's are an upper bound (``max_calls`` per continuation).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.contracts.config import ContinuationConfig, Experiment, ModelConfig
from evalkit.contracts.session import Session
from evalkit.models.prefix import PrefixIndex, prompt_text
from evalkit.models.prices import price_of
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.pipeline.plan.lengths import KINDS, OutputLengths
from evalkit.pipeline.plan.sample import FULL_REPLAY_MB, Drawn, sample_sessions, sampling_error, scale_factor

if TYPE_CHECKING:
    from evalkit.facts import Facts

STAGES = ("summarizer", "judge", "agent")
STANDIN = "[evalkit plan: stand-in summary of an assumed length, not a model]"
ANSWER_MAX, JUDGE_MAX = 400, 300  # the judge probe's max_tokens for its two calls
AGENT_STEP_TOKENS = 300  # assumed growth of the agent's conversation per call (call + tool result)


@dataclass
class Line:
    """One arm's requests to one stage."""

    arm: str
    stage: str
    requests: int = 0  # distinct requests this arm is the first to send
    shared_calls: int = 0  # requests equal to one another arm sends (answered once)
    in_cache: int = 0  # already answered in the call cache: free
    input_tokens: float = 0
    shared_prefix_tokens: float = 0  # leading tokens another request also starts with
    cached_prefix_tokens: float = 0  # leading tokens an earlier request sent (provider cache hits)
    output_tokens: float = 0
    rounds: int = 0  # the most summarizer rounds of one session (they are sequential)
    # The judge's round trips: per event, its answers at once, then its grades (events one after
    # another within a scoring process).
    trips: int = 0
    cost_usd: float | None = None
    # Requests the pilot sent while planning (counted in ``requests`` and priced in ``cost_usd``
    # like any other until settle() moves them to ``in_cache``).
    piloted: int = 0
    piloted_usd: float = 0.0

    def scaled(self, k: float) -> Line:
        """The sample's counts scaled to the corpus; the pilot's, a fixed set of calls, are not."""
        counts = ("requests", "shared_calls", "in_cache", "trips")
        tokens = ("input_tokens", "shared_prefix_tokens", "cached_prefix_tokens", "output_tokens")
        d = asdict(self)
        for f in counts:
            d[f] = round(d[f] * k)
        for f in tokens:
            d[f] = d[f] * k
        if d["cost_usd"] is not None:  # dollars scale with the tokens they pay for
            d["cost_usd"] = d["cost_usd"] * k
        return Line(**d)

    def settle(self) -> Line:
        """The pilot's requests as answered in the call cache: the run will not send them.

        They stand for themselves in the sample (its requests and dollars, scaled like the rest),
        and are taken off after scaling: taken off before, they were scaled too, and a pilot of 36
        calls in a sample scaled x2.8 took 100 requests off the corpus's estimate."""
        self.in_cache += self.piloted
        if self.cost_usd is not None:
            self.cost_usd -= self.piloted_usd
        return self


@dataclass
class Plan:
    experiment: str
    backend: str
    model: str
    sessions: int  # in the corpus
    sampled: int  # dry-replayed; counts are scaled by sessions / sampled
    lines: list[Line]
    assumptions: dict[str, Any]
    wall_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The scale-up's sampling error (one standard error of the corpus totals): requests, cost_usd.
    sampling: dict[str, Any] = field(default_factory=dict)

    def totals(self, stage: str | None = None) -> Line:
        t = Line("all", stage or "all")
        for ln in self.lines:
            if stage is None or ln.stage == stage:
                for f in ("requests", "shared_calls", "in_cache", "trips"):
                    setattr(t, f, getattr(t, f) + getattr(ln, f))
                for f in ("input_tokens", "shared_prefix_tokens", "cached_prefix_tokens", "output_tokens"):
                    setattr(t, f, getattr(t, f) + getattr(ln, f))
                t.rounds = max(t.rounds, ln.rounds)
                if ln.cost_usd is not None:
                    t.cost_usd = (t.cost_usd or 0.0) + ln.cost_usd
        return t

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["totals"] = {s: asdict(self.totals(s)) for s in (*STAGES, None) if s is None or self._has(s)}
        d["totals"]["all"] = d["totals"].pop(None)
        return d

    def _has(self, stage: str) -> bool:
        return any(ln.stage == stage for ln in self.lines)


class Ledger:
    """Collects requests as the run would send them: distinct by cache key, in order."""

    def __init__(self, tokens, key, cache, price, batch: bool, lengths: OutputLengths | None = None):
        self.tokens, self.key, self.cache, self.price, self.batch = tokens, key, cache, price, batch
        self.lengths = lengths or OutputLengths({k: 0.0 for k in KINDS})
        # Requests whose answer length is estimated: priced in finish(), once the lengths are known
        # (the pilot measures them as the plan goes). (line, session, kind, input, cached prefix)
        self.estimated: list[tuple[Line, str, str, float, float, int]] = []
        self.answered: dict[str, ChatResponse] = {}  # answers the pilot paid for, by key
        self.lines: dict[tuple[str, str], Line] = {}
        self.seen: set[str] = set()
        self.prefix = PrefixIndex()
        self.index: list[tuple[Line, int, float]] = []  # line, prefix-index position, chars per token
        # Per sampled session: the requests it sends and their dollars (for the sampling error).
        self.by_session: dict[str, list[float]] = {}

    def line(self, arm: str, stage: str) -> Line:
        return self.lines.setdefault((arm, stage), Line(arm, stage))

    def count(self, session: str, requests: int, cost: float | None) -> None:
        """Charge ``requests`` (and ``cost`` dollars) to ``session``."""
        row = self.by_session.setdefault(session, [0, 0.0])
        row[0] += requests
        row[1] += cost or 0.0

    def add(self, arm: str, stage: str, request: ChatRequest, session: str = "") -> ChatResponse | None:
        """Record a request; returns its answer when the call cache holds one or the pilot sent it."""
        key = self.key(request)
        ln = self.line(arm, stage)
        if key in self.seen:
            ln.shared_calls += 1
            return self.answered.get(key) or (self.cache.get(key) if self.cache else None)
        self.seen.add(key)
        hit = self.cache.get(key) if self.cache else None
        text = prompt_text(request)
        if hit is None and STANDIN not in text and self.lengths.wants_pilot(request.purpose, session, arm):
            # Built on no stand-in: the run sends exactly this request, so the pilot's answer,
            # stored in the run's call cache, is one the run will not pay for again.
            hit = self.lengths.pilot(request)
            if hit is not None:
                self.answered[key] = hit
        n_in = self.tokens(text)
        ln.requests += 1
        ln.input_tokens += n_in
        per_char = n_in / max(1, len(text))
        reused = self.prefix.add(text) * per_char
        self.index.append((ln, len(self.index), per_char))
        if key in self.answered:  # sent by the pilot: a request of the sample like any other
            out = hit.usage.get("completion_tokens", 0)
            ln.piloted += 1
            ln.output_tokens += out
            ln.cached_prefix_tokens += reused
            cost = self.price.cost(n_in, out, reused, self.batch) if self.price is not None else None
            if cost is not None:
                ln.cost_usd = (ln.cost_usd or 0.0) + cost
                ln.piloted_usd += cost
            self.count(session, 1, cost)
            return hit
        if hit is not None:
            ln.in_cache += 1
            ln.output_tokens += hit.usage.get("completion_tokens", 0)
            return hit
        ln.cached_prefix_tokens += reused
        self.estimated.append((ln, session, request.purpose, n_in, reused, request.max_tokens or 0))
        self.count(session, 1, None)
        return None

    def finish(self) -> list[Line]:
        for ln, i, per_char in self.index:
            ln.shared_prefix_tokens += self.prefix.shared(i) * per_char
        for ln, session, kind, n_in, reused, max_tokens in self.estimated:
            # A kind whose lengths are not measured (the recovery arm's search query): its bound.
            out = self.lengths.expected(kind) if kind in KINDS else float(max_tokens)
            ln.output_tokens += out
            if self.price is not None:
                cost = self.price.cost(n_in, out, reused, self.batch)
                ln.cost_usd = (ln.cost_usd or 0.0) + cost
                self.count(session, 0, cost)
        return list(self.lines.values())

    def estimated_output_se(self) -> float:
        """One standard error of the estimated requests' output dollars, from the lengths'
        standard errors (0 without prices, or when every length was given)."""
        if self.price is None:
            return 0.0
        n = Counter(kind for _, _, kind, _, _, _ in self.estimated)
        rate = self.price.cost(0, 1_000_000, 0, self.batch) / 1e6
        se = [n[k] * self.lengths.standard_error(k) * rate for k in n if k in KINDS]
        return sum(x for x in se if x == x)


def standin_summary(request: ChatRequest, chars: int) -> str:
    """A summary of about ``chars`` characters with the headings the system prompt asks for,
    distinct per request (as real summaries are), so later rounds' prompts are realistic in size."""
    system = next((m["content"] for m in request.messages if m.get("role") == "system"), "") or ""
    heads = [ln.strip() for ln in system.splitlines() if ln.strip().startswith("#")]
    body = "\n".join([STANDIN, *heads]) + "\n"
    tag = request.key()[:12]
    filler = f"- item {tag} "
    return body + filler * max(0, (chars - len(body)) // len(filler))


class SummarizerClient:
    """The dry replay's summarizer: the cached answer when there is one, else a stand-in."""

    arm = ""
    session = ""  # set by the dry replay (evalkit.replay.frontier.walk) before each session

    def __init__(self, ledger: Ledger, chars_per_token: int):
        self.ledger, self.chars_per_token = ledger, chars_per_token

    def key(self, request: ChatRequest) -> str:
        return self.ledger.key(request)

    def __call__(self, request: ChatRequest) -> ChatResponse:
        hit = self.ledger.add(self.arm, "summarizer", request, self.session)
        if hit is not None:
            return hit
        # As long as the summaries measured so far (by the cache or the pilot), else the bound.
        chars = int(self.ledger.lengths.expected("summarize") * self.chars_per_token)
        return ChatResponse(standin_summary(request, chars), "plan", request.model)


def _judge_params(exp: Experiment) -> dict | None:
    from evalkit.score.suite import find_suite

    suite = find_suite(exp.config.score.suite, exp.root)
    return next((dict(p) for n, p in suite.probes if n == "judge"), None)


def corpus_facts(run_dir: Path, ids: list[str]) -> dict[str, Facts]:
    """The facts of ``ids`` from the run's ``corpus/facts.jsonl`` (its corpus stage wrote them), read
    until all are found; {} when there is no such file (a plan made before any run)."""
    from evalkit.facts import read_facts

    path = run_dir / "corpus" / "facts.jsonl"
    want, out = set(ids), {}
    if not path.is_file():
        return out
    for f in read_facts(path):
        if f.session in want:
            out[f.session] = f
            if len(out) == len(want):
                break
    return out


def _judge_questions(sessions: list[Session], known: dict[str, Facts], events, per_kind: int) -> Iterator:
    """(arm, event number, probe input, question) per question the judge probe would ask; a
    session's facts from ``known`` when there, else computed."""
    from evalkit.facts import compute_facts
    from evalkit.score.base import ProbeInput, SessionView
    from evalkit.score.judge import select_questions

    views = {s.id: SessionView(s, known.get(s.id) or compute_facts(s)) for s in sessions}
    for arm, evs in events.items():
        for i, ev in enumerate(evs):
            inp = ProbeInput(ev, views[ev.session])
            for q in select_questions(inp, per_kind):
                yield arm, i, inp, q


def _recovered(ledger: Ledger, arm: str, inp, q: dict, model: str) -> str:
    """The recovery arm's one search per question (evalkit.score.recovery): its query call, and
    what the search adds to the answer's context, for the query the cache or the pilot holds,
    else for the question itself (the offline query); "" for an arm that does not recover."""
    from evalkit.score.recovery import is_recovery, query_request, recovered_block

    if not is_recovery(inp):
        return ""
    got = ledger.add(arm, "judge", query_request(inp, q["text"], model), inp.event.session)
    query = (got.text or "").strip() if got is not None else ""
    return recovered_block(inp, query or q["text"])


def build_plan(
    exp: Experiment,
    run_dir: str | os.PathLike,
    sample: int | None = None,
    summary_tokens: int | None = None,
    latency_s: float = 10.0,
    answer_tokens: int | None = None,
    grade_tokens: int | None = None,
    pilot: int = 0,
) -> Plan:
    """The plan of ``exp``: every session dry-replayed when the corpus is small enough, else a
    sample of ``sample`` sessions, or as many as fit (evalkit.pipeline.plan.sample), scaled up.

    Answer lengths (most of the dollars) are as given, else measured on the call cache's answers,
    else by a ``pilot`` of that many real calls per kind (stored in the run's call cache, so the
    run does not send them again), else max_tokens (evalkit.pipeline.plan.lengths)."""
    from evalkit.common.tokens import get_counter
    from evalkit.models.client import build_client
    from evalkit.replay.frontier import walk
    from evalkit.replay.variants import check_arm
    from evalkit.score.judge_model import answer_request, judge_request

    replay, model = exp.config.replay, exp.config.model
    arms = list(replay.arms)
    for a in arms:
        check_arm(a, replay.variants)
    run = Path(run_dir)
    shared = model.cache_path
    model = model.model_copy(
        update={"cache_path": str(exp.resolve_path(shared) if shared else run / "model-calls.sqlite")}
    )
    cached = Path(model.cache_path).exists()
    # Only for its keys and cache lookups: no budget ledger, no cache file created.
    unmetered = {"max_calls": None, "max_cost_usd": None}
    client = build_client(model.model_copy(update={**unmetered, "cache": "use" if cached else "off"}))
    price = price_of(model.prices, model.model)
    batch = model.batch
    counter = get_counter(replay.tokenizer)
    name = model.model
    offline = offline_backend(model)
    lengths = OutputLengths(
        {"summarize": float(replay.summary_max_tokens), "answer": ANSWER_MAX, "judge": JUDGE_MAX},
        {"summarize": summary_tokens, "answer": answer_tokens, "judge": grade_tokens},
        cached=client.cache.output_lengths(name, client.backend.base_url)
        if client.cache and not offline
        else {},
        pilot_calls=0 if offline else max(0, pilot),
        make_client=lambda: build_client(model.model_copy(update={**unmetered, "cache": "use"})),
    )
    ledger = Ledger(counter, client.key, client.cache, price, batch, lengths)
    chars_per_token = 4
    summarizer = SummarizerClient(ledger, chars_per_token)
    drawn = sample_sessions(exp, run, sample)
    sessions, total = drawn.sessions, drawn.total
    result = walk(sessions, arms, replay, model, summarizer)
    for arm, evs in result.events.items():
        # Within a session the engine answers an arm's request from another arm's equal call
        # without asking the client: those are the arm's shared calls.
        ln = ledger.line(arm, "summarizer")
        ln.shared_calls += sum(e.request is not None for e in evs) - ln.requests - ln.shared_calls
    rounds: dict[str, int] = {}
    for arm, evs in result.events.items():
        per_session: dict[str, int] = {}
        for e in evs:
            per_session[e.session] = max(per_session.get(e.session, 0), e.round)
        rounds[arm] = max(per_session.values(), default=0)
    notes: list[str] = []
    judge = _judge_params(exp)
    if judge is not None and not offline:
        reps, per_kind = int(judge.get("replicates", 1)), int(judge.get("per_kind", 1))
        asked: Counter = Counter()
        # The sampled sessions come from the run's corpus when it has one, and so do their facts:
        # computing them again took ~0.2-0.4 s a session on the default corpus.
        known = corpus_facts(run, [s.id for s in sessions])
        for arm, i, inp, q in _judge_questions(sessions, known, result.events, per_kind):
            sid = inp.event.session
            found = _recovered(ledger, arm, inp, q, name)
            for r in range(reps):
                asked[arm, i] += 1
                ans = answer_request(q, inp, name, r, found)
                got = ledger.add(arm, "judge", ans, sid)
                # The judge grades the answer: the cached or piloted one, else a stand-in of the
                # expected length, distinct per answer.
                text = (
                    got.text
                    if got is not None and got.text
                    else _standin_answer(ans, lengths, chars_per_token)
                )
                ledger.add(arm, "judge", judge_request(q, text, name, r), sid)
        conc = model.concurrency
        for (arm, _), k in asked.items():
            ledger.line(arm, "judge").trips += 2 * math.ceil(k / conc)
        notes.append("judge: an answer and a grade per question")
    cont = exp.config.continuation
    if cont.enabled and not _proxy_agent(cont) and not offline:
        _agent_lines(ledger, result.events, cont, name)
        notes.append(
            f"continuation agent: an upper bound, {cont.max_calls} calls per continuation, "
            f"each growing by {AGENT_STEP_TOKENS} tokens"
        )
    lines = ledger.finish()
    kinds = ["summarize", *(("answer", "judge") if judge is not None and not offline else ())]
    notes.insert(
        0,
        "output lengths: "
        + "; ".join(lengths.describe(k) for k in kinds)
        + ". Summarizer rounds after the first are estimated: uncached requests are answered with a "
        "stand-in summary of that length",
    )
    if lengths.pilot_sent():
        notes.insert(
            1,
            f"pilot: {lengths.pilot_sent()} real calls sent now ("
            + (f"${lengths.pilot_cost_usd:.4f}, " if price is not None else "")
            + "stored in the run's call cache: the run will not send them again; not in the totals)",
        )
    if lengths.pilot_error:
        notes.insert(1, f"pilot stopped: {lengths.pilot_error}")
    output_se = ledger.estimated_output_se()
    lengths.close()
    for ln in lines:
        if ln.stage == "summarizer":
            ln.rounds = rounds.get(ln.arm, 0)
    # Requests grow with a session's compactions, so a sample is scaled by the corpus's size past
    # the trigger over the sample's (a ratio estimate) when the corpus's sizes are known, else by
    # its session count.
    k, sizes, basis = scale_factor(drawn, replay)
    per_session = [ledger.by_session.get(s.id, [0, 0.0]) for s in sessions]
    sampling = sampling_error(per_session, total, sizes)
    sampling["drawn"] = drawn.how
    sampling["volume_mb"] = drawn.volume_mb
    # The answer lengths' own error (cache or pilot sample), scaled like the dollars it prices.
    sampling["output_cost_se"] = output_se * (k if len(sessions) < total else 1.0)
    sampling["pilot_calls"] = lengths.pilot_sent()
    sampling["pilot_cost_usd"] = lengths.pilot_cost_usd
    sampling["output_lengths"] = {
        kd: {"tokens": lengths.expected(kd), "se": lengths.standard_error(kd), "source": lengths.source(kd)}
        for kd in kinds
    }
    if len(sessions) < total:
        lines = [ln.scaled(k) for ln in lines]
    lines = [ln.settle() for ln in lines]
    notes.append(_sample_note(drawn, k, basis))
    if price is None:
        notes.append(f"no price for model {name!r} in [model.prices]: dollars unknown")
    plan = Plan(
        exp.name,
        model.backend,
        name,
        total,
        len(sessions),
        lines,
        {
            "summary_tokens": lengths.expected("summarize"),
            "latency_s": latency_s,
            "concurrency": model.concurrency,
            "replay_workers": replay.workers or os.cpu_count() or 1,
            # Processes of the scoring stage (one per core) and the continuation stage; each takes
            # whole sessions, so no more of them work than there are sessions.
            "score_workers": max(1, min(os.cpu_count() or 1, total)),
            "agent_workers": max(1, min(cont.workers or os.cpu_count() or 1, total)),
            "batch": batch,
            "prices": model.prices.get(name),
        },
        notes=notes,
        sampling=sampling,
    )
    plan.wall_s = wall_time(plan, latency_s)
    client.close()
    return plan


def _sample_note(drawn: Drawn, k: float, basis: str) -> str:
    """What the plan dry-replayed, and how it scaled the sample up."""
    n = len(drawn.sessions)
    volume = (
        f"{drawn.volume_mb:,.1f} MB of sessions x arms x replicates"
        if drawn.volume_mb is not None
        else "the corpus's size unknown before it is built"
    )
    if n >= drawn.total:
        return f"dry-replayed every one of the {drawn.total} sessions ({volume}): nothing scaled"
    return (
        f"dry-replayed {n} of {drawn.total} sessions drawn at random, seeded by the experiment "
        f"({volume}; every session is dry-replayed up to {FULL_REPLAY_MB:.0f} MB, or with --sample "
        f"{drawn.total}); counts, tokens and dollars scaled x{k:.2f} ({basis})"
    )


def _standin_answer(ans: ChatRequest, lengths: OutputLengths, chars_per_token: int) -> str:
    return (STANDIN + ans.key()).ljust(int(lengths.expected("answer") * chars_per_token))


def offline_backend(model: ModelConfig) -> bool:
    """True when ``[model]``'s backend is an offline stand-in (it sends nothing, costs nothing)."""
    from evalkit.models import is_offline_standin

    try:
        return is_offline_standin(model.backend)
    except KeyError:
        return False


def _proxy_agent(cont: ContinuationConfig) -> bool:
    from evalkit.continuation.agents import is_proxy

    return is_proxy(cont.agent)


def _agent_lines(ledger: Ledger, events, cont: ContinuationConfig, model: str) -> None:
    """Upper bound for a model agent: ``max_calls`` calls, each resending the context and growing."""
    n = cont.max_calls
    out = cont.max_tokens or 1024  # no cap set: assume a typical reply
    for arm, evs in events.items():
        ln = ledger.line(arm, "agent")
        for ev in evs:
            ledger.count(ev.session, n, None)
            ln.requests += n
            ln.input_tokens += sum(ev.tokens_after + k * AGENT_STEP_TOKENS for k in range(n))
            # Each call resends the previous one's prompt: all but the growth is a shared prefix.
            ln.shared_prefix_tokens += sum(ev.tokens_after + k * AGENT_STEP_TOKENS for k in range(n - 1))
            ln.cached_prefix_tokens += sum(ev.tokens_after + k * AGENT_STEP_TOKENS for k in range(n - 1))
            ln.output_tokens += n * out
            if ledger.price is not None:
                cost = ledger.price.cost(
                    ln.input_tokens, ln.output_tokens, ln.cached_prefix_tokens, ledger.batch
                )
                ln.cost_usd = cost


def wall_time(plan: Plan, latency_s: float) -> dict[str, float]:
    """Seconds per stage at the effective concurrency. The replay runs one call at a time per worker
    process (a session's rounds are sequential), so its concurrency is the number of workers, not
    ``[model] concurrency``. Scoring runs a process per core, each event after event, an event's
    answers at once and then its grades (up to ``[model] concurrency``): its round trips, shared
    among the processes. A model agent sends one call at a time, in each of ``[continuation]
    workers`` processes."""
    a = plan.assumptions
    out = {}
    for stage in STAGES:
        t = plan.totals(stage)
        n = t.requests - t.in_cache
        if not plan._has(stage):
            continue
        if a["batch"] and stage == "summarizer":
            out[stage] = float("nan")  # a provider batch finishes within its window (up to 24 h)
            continue
        if stage == "judge":
            procs = a["score_workers"]
            trips = math.ceil(t.trips / procs)
            out[stage] = max(trips, math.ceil(n / (max(1, a["concurrency"]) * procs))) * latency_s
            continue
        eff = min(a["replay_workers"], a["concurrency"]) if stage == "summarizer" else a["agent_workers"]
        out[stage] = max(math.ceil(n / max(1, eff)), t.rounds) * latency_s
    return out
