"""Which endpoints a run sends session content to, checked before any work.

A typo in a URL (``htpp://``, no scheme) used to run silent for minutes; an empty ``base_url``
with no ``OPENAI_BASE_URL`` sent the sessions to the public API by default. Here every endpoint
a run will call is named, with where its URL came from (config, environment, default); a URL
without an http(s) scheme and a host is refused at once, and the public default is used only
with ``--allow-remote``. The endpoints are recorded in the run folder and the report.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from evalkit.common.redact import redact_text
from evalkit.contracts.config import ExperimentConfig, ModelConfig

SENDING_BACKENDS = ("openai",)  # backends that send requests (replay answers from the cache only)


class EndpointError(ValueError):
    """An endpoint URL that cannot be used, or a remote one not allowed."""


@dataclass(frozen=True)
class Endpoint:
    role: str  # "model" (summarizer and judge) or "continuation" (the agent)
    url: str  # redacted
    source: str  # config | environment | default
    local: bool

    def describe(self) -> str:
        where = {"config": "from the config", "environment": "from OPENAI_BASE_URL", "default": "the default"}
        return f"{self.role}: {self.url} ({where[self.source]}, {'local' if self.local else 'remote'})"

    def to_dict(self) -> dict:
        return asdict(self)


def check_url(url: str, where: str) -> None:
    """Raise EndpointError unless ``url`` is http(s)://host[...]."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as e:
        raise EndpointError(f"{where}: {redact_text(url)!r} is not a URL ({e})") from None
    if parts.scheme not in ("http", "https"):
        raise EndpointError(
            f"{where}: {redact_text(url)!r} needs an http:// or https:// scheme"
            + (f" (got {parts.scheme}://)" if parts.scheme and "://" in url else "")
        )
    if not host:
        raise EndpointError(f"{where}: {redact_text(url)!r} names no host")


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine or a private network address."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_unspecified


def endpoint_of(settings: ModelConfig, role: str) -> Endpoint | None:
    """The endpoint a model section sends to (None for backends that send nothing)."""
    if settings.backend not in SENDING_BACKENDS:
        return None
    if settings.base_url:
        url, source = settings.base_url, "config"
    elif os.environ.get("OPENAI_BASE_URL"):
        url, source = os.environ["OPENAI_BASE_URL"], "environment"
    else:
        from evalkit.models.openai_backend import DEFAULT_BASE_URL

        url, source = DEFAULT_BASE_URL, "default"
    check_url(url, f"{role} endpoint ({'OPENAI_BASE_URL' if source == 'environment' else 'base_url'})")
    return Endpoint(role, redact_text(url.rstrip("/")), source, is_local(url))


def run_endpoints(config: ExperimentConfig) -> list[Endpoint]:
    """Every endpoint a run of ``config`` sends to: [model]'s, and the continuation agent's when
    it is a model (its settings are [model] with [continuation.model] on top)."""
    out = []
    model = config.model
    ep = endpoint_of(model, "model")
    if ep is not None:
        out.append(ep)
    cont = config.continuation
    if cont.enabled and not _proxy(cont.agent):
        ep = endpoint_of(model.with_overrides(cont.model), "continuation")
        if ep is not None and ep not in [replace_role(e, "continuation") for e in out]:
            out.append(ep)
    return out


def replace_role(ep: Endpoint, role: str) -> Endpoint:
    return Endpoint(role, ep.url, ep.source, ep.local)


def _proxy(agent: str) -> bool:
    from evalkit.continuation.agents import is_proxy

    try:
        return is_proxy(agent)
    except KeyError:
        return False


def check_endpoints(config: ExperimentConfig, allow_remote: bool) -> list[Endpoint]:
    """The run's endpoints, refusing bad URLs and — without ``allow_remote`` — session content
    bound for a remote endpoint nobody named (no base_url in the config or the environment)."""
    eps = run_endpoints(config)
    for ep in eps:
        if ep.source == "default" and not ep.local and not allow_remote:
            raise EndpointError(
                f"[{ep.role}] base_url is empty and OPENAI_BASE_URL is unset: the sessions would go to "
                f"{ep.url}; set base_url (or OPENAI_BASE_URL), or pass --allow-remote to send them there"
            )
    return eps
