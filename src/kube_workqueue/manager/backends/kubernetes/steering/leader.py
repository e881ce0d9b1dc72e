"""Leader election on a coordination.k8s.io/v1 Lease, one per queue, with client-go's defaults:
lease duration 15 s, renew deadline 10 s, retry period 2 s.

Every retry period the elector reads the Lease and either renews it (it holds it), takes it
(absent, or its holder has not renewed for a lease duration), or stands by. Every write names
the resourceVersion it read, so two candidates racing for an expired Lease cannot both win: the
API server answers the loser 409 Conflict. A leader that cannot renew for the renew deadline
gives up at once - before its lease can expire under another leader - and tells its caller. A
leader that stops cleanly (SIGTERM) releases the Lease - no holder - so a standby takes it at
its next retry instead of waiting out the lease duration (client-go's ReleaseOnCancel).

Times in the Lease are wall-clock (RFC 3339 with microseconds, as the API stores them); the
decision "expired" compares them with this machine's clock, as client-go does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ..client.api import KubeApi, KubeError

log = logging.getLogger(__name__)


def micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> float:
    """An RFC 3339 time as the API (or the client's serialiser) wrote it; 0 when absent."""
    if not text:
        return 0.0
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        lease_name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.lease_name = lease_name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.leading = threading.Event()
        self._last_renew = 0.0
        self._stop = threading.Event()

    def try_acquire_or_renew(self) -> bool:
        """One round; True when this candidate holds the Lease afterwards."""
        now = self.clock()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": micro_time(now),
        }
        try:
            lease = self.api.get("leases", self.lease_name)
        except KubeError as exc:
            if exc.reason != "NotFound":
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.lease_name},
                "spec": {**spec, "acquireTime": micro_time(now), "leaseTransitions": 0},
            }
            try:
                self.api.create("leases", body)
            except KubeError:
                return False
            self._last_renew = now
            return True
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = parse_time(current.get("renewTime"))
        duration = current.get("leaseDurationSeconds") or self.lease_duration
        if holder != self.identity and holder and renewed + duration > now:
            return False  # held, and not expired
        new_spec = dict(current, **spec)
        if holder != self.identity:
            new_spec["acquireTime"] = micro_time(now)
            new_spec["leaseTransitions"] = (current.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            self.api.replace("leases", self.lease_name, lease)  # guarded by resourceVersion
        except KubeError:
            return False
        self._last_renew = now
        return True

    def run(self) -> None:
        """Campaign until stopped; calls the callbacks on each change of leadership."""
        while not self._stop.is_set():
            ok = self.try_acquire_or_renew()
            if ok and not self.leading.is_set():
                log.info("leader election: %s now leads %s", self.identity, self.lease_name)
                self.leading.set()
                if self.on_started_leading:
                    self.on_started_leading()
            elif (
                not ok
                and self.leading.is_set()
                and self.clock() - self._last_renew > self.renew_deadline
            ):
                log.warning(
                    "leader election: %s could not renew %s for %gs; stepping down",
                    self.identity,
                    self.lease_name,
                    self.renew_deadline,
                )
                self.leading.clear()
                if self.on_stopped_leading:
                    self.on_stopped_leading()
            self._stop.wait(self.retry_period)

    def wait_leading(self, stop: Callable[[], bool]) -> bool:
        """Block until this candidate leads (True) or `stop()` is true (False)."""
        while not self.leading.wait(0.5):
            if stop():
                return False
        return True

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when leadership, once gained, is lost."""
        self.on_stopped_leading = callback

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop campaigning; a leader releases its Lease (client-go's ReleaseOnCancel), so a
        standby takes over at its next retry, not a whole lease duration later."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(timeout=self.retry_period + 5)
        if self.leading.is_set():
            self.leading.clear()
            self.release()

    def release(self) -> bool:
        """Give the Lease up if this candidate still holds it: no holder, a one-second lease,
        written with the resourceVersion read (a lease already taken is left alone)."""
        try:
            lease = self.api.get("leases", self.lease_name)
        except KubeError:
            return False
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return False
        now = micro_time(self.clock())
        lease["spec"] = dict(
            spec, holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now
        )
        try:
            self.api.replace("leases", self.lease_name, lease)
        except KubeError as exc:
            log.warning("leader election: could not release %s: %s", self.lease_name, exc)
            return False
        log.info("leader election: %s released %s", self.identity, self.lease_name)
        return True
