"""Putting a manager together from typed options: the source client, the chosen backend's parts
(ledger, runner, elector) through the registry, the metrics registry and the stats endpoint.

The assembly chooses the ledger: the backend's own (`setup()`: the state directory's SQLite
file, the cluster's record), or - when the options name one with `--ledger` - the ledger a
fleet shares, opened by `manager.fleet.joining` around the backend's runner and its one start
hook (`fleet_runner()`). The manager's mode follows (`manager.runtime.modes`): alone, or one
of a fleet.

Shared by `workqueue manager` and `workqueue run`; it knows no argparse - the command line hands
it `ManagerOptions`, the backend's own options and where to serve stats. The manager is built
with its parts (`Manager.built`: `runtime.wiring`, the one place they are put together);
`Assembled.close()` stops what was started, in reverse order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..ambassador.sources.registry import credential_variables
from . import backends
from .errors import UserError
from .fleet.options import NamesALedger
from .ports import Ledger, Source
from .runtime.modes import mode_for
from .runtime.runner import Manager, ManagerOptions
from .setup_parts import ManagerSeeds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatsEndpoint:
    """Where the manager serves /metrics, /stats, /healthz and the dashboard (`ui_token`: the
    dashboard's bearer token, see `manager.views.dashboard`)."""

    host: str = "127.0.0.1"
    port: int = 0
    ui_token: str | None = None
    allowed_hosts: frozenset[str] = frozenset()  # names a request's Host may give (rebinding)


@dataclass
class Assembled:
    manager: Manager
    ledger: Ledger
    _closers: list[Callable[[], None]] = field(default_factory=list)
    # `Parts.fence`: nothing of this manager writes where other managers read, from now on
    fence: Callable[[float], bool] = lambda timeout: True

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()


def assemble(
    source: str | Source,
    backend_name: str,
    backend_options: Any,
    options: ManagerOptions,
    *,
    stats: StatsEndpoint | None = None,
) -> Assembled:
    """A manager of `backend_name` (see `manager.backends`) over `source`: an ambassador's
    URL, or a ready `Source`. Metrics are kept only when `stats` serves them. The caller's
    duty: `close()` the result, whatever happens."""
    if isinstance(source, str):
        from .sources.http import SourceClient

        client = SourceClient(source)
    else:
        client = source
    registry = None
    if stats is not None:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
    seeds = ManagerSeeds(
        registry, options.parallelism, options.max_attempts,
        (options.retry_backoff, options.retry_backoff_cap), credential_variables(),
    )  # fmt: skip
    package = backends.load(backend_name)
    # a fleet's ledger, in place of the backend's own
    if isinstance(backend_options, NamesALedger) and backend_options.ledger:
        from .fleet.joining import join

        parts = join(package, backend_name, backend_options, seeds)
    else:
        parts = package.setup(backend_options, seeds)
    closers = [parts.close]
    try:
        manager = Manager.built(
            client, parts.ledger, parts.backend, options, elector=parts.elector, registry=registry,
            mode=mode_for(parts.ledger, parts.backend),  # alone, or one of a fleet
        )  # fmt: skip
        if stats is not None:
            from .views.dashboard import Dashboard, board
            from .views.stats_server import StatsServer

            dashboard = Dashboard(lambda: board(manager), host=stats.host, token=stats.ui_token)
            try:
                server = StatsServer(
                    manager.asked.stats, registry, stats.host, stats.port, dashboard,
                    allowed_hosts=stats.allowed_hosts,
                )  # fmt: skip
            except (OSError, ValueError) as exc:
                why = getattr(exc, "strerror", None) or str(exc)
                raise UserError(
                    f"cannot serve metrics on {stats.host}:{stats.port}: {why}"
                ) from None
            closers.append(server.stop)
            log.info(
                "dashboard, metrics and stats on http://%s:%s/", _url_host(stats.host), server.port
            )
    except BaseException:
        for close in reversed(closers):
            close()
        raise
    return Assembled(manager, parts.ledger, closers, fence=parts.fence)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
