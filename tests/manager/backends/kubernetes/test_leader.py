"""Leader election on a Lease: one leader; a stopped leader is replaced once its lease
expires; a racing pair never both win (resourceVersion guard)."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.kubernetes.client.api import (
    KubeApi,
    KubeError,
    load_configuration,
)
from kube_workqueue.manager.backends.kubernetes.steering.leader import LeaderElector, parse_time

NS = "media"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api(apiserver, tmp_path):
    kube_api = KubeApi(NS, load_configuration(apiserver.write_kubeconfig(tmp_path / "kc")), qps=0)
    yield kube_api
    kube_api.close()


def test_one_leader_and_a_handover_after_the_lease_expires(api):
    clock = Clock()
    a = LeaderElector(api, "thumbs-leader", "a", clock=clock)
    b = LeaderElector(api, "thumbs-leader", "b", clock=clock)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    clock.now += 10
    assert a.try_acquire_or_renew() is True  # renewal
    clock.now += 14
    assert b.try_acquire_or_renew() is False  # renewed 14 s ago: still held
    clock.now += 2  # a stopped renewing: 16 s > 15 s lease
    assert b.try_acquire_or_renew() is True
    lease = api.get("leases", "thumbs-leader")["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    assert parse_time(lease["renewTime"]) == pytest.approx(clock.now, abs=1e-3)
    assert a.try_acquire_or_renew() is False


def test_a_stale_read_loses_the_race(api):
    clock = Clock()
    a = LeaderElector(api, "l", "a", clock=clock)
    a.try_acquire_or_renew()
    clock.now += 20  # expired: both b and c will try to take it
    stale = api.get("leases", "l")
    b = LeaderElector(api, "l", "b", clock=clock)
    assert b.try_acquire_or_renew() is True
    stale["spec"]["holderIdentity"] = "c"
    from kube_workqueue.manager.backends.kubernetes.client.api import KubeError

    with pytest.raises(KubeError) as exc:  # c's write names the version it read
        api.replace("leases", "l", stale)
    assert exc.value.reason == "Conflict"


def test_the_loop_reports_leading_and_stepping_down(api, apiserver):
    events = []
    clock = Clock()
    elector = LeaderElector(
        api,
        "x",
        "me",
        clock=clock,
        retry_period=0.01,
        on_started_leading=lambda: events.append("start"),
        on_stopped_leading=lambda: events.append("stop"),
    )
    elector.start()
    try:
        from tests.support.servers import wait_until

        wait_until(elector.leading.is_set)

        def intrude() -> bool:  # read-modify-write, again when a renewal came in between
            other = api.get("leases", "x")
            other["spec"]["holderIdentity"] = "intruder"
            try:
                api.replace("leases", "x", other)
            except KubeError as exc:
                if exc.reason != "Conflict":
                    raise
                return False
            return True

        wait_until(intrude)
        clock.now += 11  # past the renew deadline without a renewal
        wait_until(lambda: not elector.leading.is_set())
    finally:
        elector.stop()
    assert events[:2] == ["start", "stop"]


def test_a_clean_stop_releases_the_lease_and_a_standby_takes_it_at_its_next_retry(api):
    """On the Lease's own timestamps: the standby's acquireTime follows the old leader's last
    renewal by about one retry period, not by the 15 s lease duration."""
    from tests.support.servers import wait_until

    leader = LeaderElector(api, "q-leader", "a", retry_period=0.2).start()
    standby = None
    try:
        wait_until(leader.leading.is_set)
        standby = LeaderElector(api, "q-leader", "b", retry_period=0.5).start()
        wait_until(lambda: api.get("leases", "q-leader")["spec"]["renewTime"], timeout=5)
        last_renewal = parse_time(api.get("leases", "q-leader")["spec"]["renewTime"])
        assert not standby.leading.is_set()
        leader.stop()  # SIGTERM's path: the manager closes its parts
        assert not leader.leading.is_set()
        wait_until(standby.leading.is_set, timeout=5)
        lease = api.get("leases", "q-leader")["spec"]
        assert lease["holderIdentity"] == "b"
        handover = parse_time(lease["acquireTime"]) - last_renewal
        assert handover < 0.2 + 0.5 + 1.0 < lease["leaseDurationSeconds"]
    finally:
        leader.stop()
        if standby is not None:
            standby.stop()


def test_release_leaves_a_lease_someone_else_holds_alone(api):
    clock = Clock()
    a = LeaderElector(api, "r", "a", clock=clock)
    b = LeaderElector(api, "r", "b", clock=clock)
    assert a.try_acquire_or_renew()
    clock.now += 20
    assert b.try_acquire_or_renew()  # a's lease expired; b holds it now
    assert a.release() is False
    assert api.get("leases", "r")["spec"]["holderIdentity"] == "b"
