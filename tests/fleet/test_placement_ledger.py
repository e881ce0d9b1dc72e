"""Placement in the shared ledger itself (`manager.fleet.placed`), on a real PostgreSQL: an
item's need recorded by its id, claims that take only what this manager's offers meet (a need
recorded after its last look included once it looks again), the count of what waits for a
manager no live one is - the `workqueue_items_unmet` metric - and those items out of the line
(`settle_unmet`), so that claims do not walk past them."""

from __future__ import annotations

import threading

import psycopg

from kube_workqueue.manager.fleet import manager_statements
from kube_workqueue.manager.fleet import statements as sql_statements
from kube_workqueue.manager.fleet.placed import UNMET_LOCK_KEY
from kube_workqueue.manager.placement import Placement, need_rule, offer
from kube_workqueue.manager.views.observe import ClaimsCollector
from tests.support.servers import wait_until

from .conftest import sql

RULES = [need_rule("render/*=gpu"), need_rule("eu/*=region in (eu,ch)")]


def placed(open_ledger, owner: str, *offers: str):
    ledger = open_ledger(owner, join=False)
    ledger.place(Placement([offer(o) for o in offers], RULES))
    ledger.join()
    return ledger


def test_each_manager_claims_only_what_its_offers_meet(open_ledger):
    gpu, cpu = placed(open_ledger, "gpu", "gpu=a100"), placed(open_ledger, "cpu", "region=ch")
    cpu.see(["render/a", "eu/b", "plain/c"])
    assert sorted(cpu.claim(10)) == ["eu/b", "plain/c"]  # not the render
    assert gpu.claim(10) == ["render/a"]
    assert cpu.claim(10) == [] and gpu.claim(10) == []


def test_a_need_recorded_after_a_managers_last_look_is_judged_before_it_claims(open_ledger):
    gpu, cpu = placed(open_ledger, "gpu", "gpu=h100"), placed(open_ledger, "cpu")
    assert cpu.claim(1) == [] and gpu.claim(1) == []  # both looked: no needs yet
    cpu.see(["render/new"])  # a need neither has seen
    cpu._settings = (-1e18, cpu._settings[1])  # (its settings a moment old, as they will be)
    assert cpu.claim(1) == []
    gpu._settings = (-1e18, gpu._settings[1])
    assert gpu.claim(1) == ["render/new"]


def test_a_need_whose_lower_id_commits_after_a_higher_one_is_still_judged(open_ledger, postgres):
    """Ids are handed out when a need is interned, not when it commits: a need made in a
    transaction that commits after a later one's must still be judged - not skipped as
    "older than what was read" (its items waited for ever on the one manager that meets
    it), and never taken before it is judged."""
    gpu, cpu = placed(open_ledger, "gpu", "gpu=a100"), placed(open_ledger, "cpu", "region=ch")
    with psycopg.connect(postgres) as slow:
        slow.execute("SET search_path TO workqueue")
        (early,) = slow.execute("INSERT INTO needs (expr) VALUES ('gpu') RETURNING id").fetchone()
        cpu.see(["eu/x"])  # a later need (region in (ch,eu)) commits first, with a higher id
        for ledger in (gpu, cpu):
            ledger._settings = (-1e18, ledger._settings[1])
        assert cpu.claim(5) == ["eu/x"] and gpu.claim(5) == []  # both judged what they saw
        slow.commit()
    assert gpu._needs_seen > early  # what it read was above the early id
    with psycopg.connect(postgres) as other:  # an item of the early need, as a manager writes it
        other.execute("SET search_path TO workqueue")
        other.execute("INSERT INTO items (name, state, attempts, first_seen, need) "
                      "VALUES ('render/late', 'pending', 0, 0, %s)", (early,))  # fmt: skip
    for ledger in (gpu, cpu):
        ledger._settings = (-1e18, ledger._settings[1])
    assert cpu.claim(5) == []  # judged now: not its need
    assert gpu.claim(5) == ["render/late"]


def test_what_no_live_manager_can_run_is_counted_by_need(open_ledger):
    cpu = placed(open_ledger, "cpu", "region=us")
    cpu.see(["render/a", "render/b", "eu/c", "plain/d"])
    assert cpu.unmet_needs() == {"gpu": 2, "region in (ch,eu)": 1}
    family = [f for f in ClaimsCollector(dict, "cpu", None, cpu.unmet_needs).collect()
              if f.name == "workqueue_items_unmet"][0]  # fmt: skip
    assert {s.labels["need"]: s.value for s in family.samples} == {"gpu": 2, "region in (ch,eu)": 1}
    placed(open_ledger, "gpu", "gpu=a100")
    cpu._unmet = (-1e18, {})  # (a scrape a few seconds later)
    assert cpu.unmet_needs() == {"region in (ch,eu)": 1}


def test_a_tenants_items_are_pinned_by_its_group(open_ledger):
    from kube_workqueue.manager.runtime.tenants import Tenants
    from kube_workqueue.manager.tenancy.rules import TenancyOptions

    rules = [need_rule("group:eu-*=region==eu")]
    eu, us = (open_ledger(owner, join=False) for owner in ("eu", "us"))
    for ledger, region in ((eu, "eu"), (us, "us")):
        ledger.place(Placement([offer(f"region={region}")], rules))
        ledger.join()
        ledger.use_tenants(Tenants(TenancyOptions(group="^([^/]+)/")))
    us.see(["eu-acme/a.mp4", "us-bob/b.mp4", "eu-acme/c.mp4"])
    assert us.claim(10) == ["us-bob/b.mp4"]  # the EU tenant's items are not the US manager's
    assert sorted(eu.claim(10)) == ["eu-acme/a.mp4", "eu-acme/c.mp4"]


def walked_past(ledger, url: str) -> int:
    """How many rows the claim's walk of the line read and passed over: EXPLAIN ANALYZE of
    the claim statement as this manager would run it, in a transaction rolled back."""
    text = sql_statements.CLAIM.sql.format(**sql_statements.claim_format(ledger._free(), 1))
    text = text.replace("%(owner)s", f"'{ledger.owner}'")
    with psycopg.connect(url) as conn:
        conn.execute("SET search_path TO workqueue")
        (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text).fetchone()
        conn.rollback()
    passed = []

    def visit(node):
        if node.get("Index Name") == "items_line":
            passed.append(node.get("Rows Removed by Filter", 0))
        for child in node.get("Plans", ()):
            visit(child)

    visit(plan[0]["Plan"])
    assert passed, plan  # (the claim walks the line's index)
    return sum(passed)


def test_what_no_live_manager_can_run_leaves_the_line_and_comes_back_when_one_can(
    open_ledger, postgres
):
    cpu = placed(open_ledger, "cpu", "region=us")
    cpu.see([f"render/{i:04}" for i in range(300)] + ["plain/a", "plain/b"])
    assert cpu.claim(1) == ["plain/a"]
    assert walked_past(cpu, postgres) == 300  # each claim reads past renders none may run
    cpu.heartbeat_round()  # its heartbeat settles which items wait for a manager none is
    assert sql(cpu, "SELECT count(*) FROM items WHERE unmet")[0][0] == 300
    assert walked_past(cpu, postgres) == 0
    assert cpu.claim(5) == ["plain/b"]
    gpu = placed(open_ledger, "gpu", "gpu=a100")  # its first claim judges, and brings them back
    assert gpu.claim(2) == ["render/0000", "render/0001"]
    assert sql(cpu, "SELECT count(*) FROM items WHERE unmet")[0][0] == 0


def test_a_settling_that_read_the_offers_before_a_manager_joined_cannot_hide_its_items(
    open_ledger, postgres
):
    """A settling reads the live offers, then marks: a manager that meets a need and joins in
    between unmarks its items only once that settling has committed - not before, to have
    them marked again behind it (out of the line with a live manager that meets them)."""
    cpu = placed(open_ledger, "cpu", "region=us")
    cpu.see(["render/a", "render/b", "render/c"])
    (need,) = sql(cpu, "SELECT DISTINCT need FROM items")[0]
    with psycopg.connect(postgres) as settling:  # has the lock, has read: no gpu anywhere
        settling.execute("SET search_path TO workqueue")
        settling.execute("SELECT pg_try_advisory_xact_lock(%s)", (UNMET_LOCK_KEY,))
        gpu = placed(open_ledger, "gpu", "gpu=a100")
        claimed: list[list[str]] = []
        joining = threading.Thread(target=lambda: claimed.append(gpu.claim(1)))
        joining.start()
        wait_until(lambda: sql(cpu, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                    "AND NOT granted")[0][0] == 1, timeout=30)  # fmt: skip
        settling.execute("UPDATE items SET unmet = true WHERE need = %s", (need,))
        settling.commit()
        joining.join(timeout=60)
    assert claimed == [["render/a"]]
    assert sql(cpu, "SELECT name FROM items WHERE unmet") == []


def test_what_only_a_draining_manager_could_run_is_unmet_until_the_drain_is_lifted(
    open_ledger, postgres
):
    """A manager asked to drain takes nothing new: a need only it meets waits for a manager
    that does - counted on the metric, out of the line, and said so by `status` - and is back
    in the line at the next settling once the drain is lifted."""
    from kube_workqueue.manager.fleet.queue_commands import FleetQueueOps

    gpu, cpu = placed(open_ledger, "gpu", "gpu=a100"), placed(open_ledger, "cpu", "region=us")
    renders = [f"render/{i}" for i in range(3)]
    cpu.see([*renders, "plain/a"])
    assert cpu.unmet_needs() == {}  # the gpu manager takes them
    for ledger in (gpu, cpu):
        ledger.note_manager({"parallelism": 1, "max_attempts": 3, "retry_backoff": 1,
                             "retry_backoff_cap": 10})  # fmt: skip
    gpu.db.run(manager_statements.DRAIN, manager="gpu")
    cpu._unmet = (-1e18, {})  # (a scrape a few seconds later)
    assert cpu.unmet_needs() == {"gpu": 3}
    cpu.heartbeat_round()
    assert sql(cpu, "SELECT count(*) FROM items WHERE unmet")[0][0] == 3
    with FleetQueueOps(postgres) as ops:
        record = ops.status()
    assert {name: record.reasons[name] for name in renders} == dict.fromkeys(
        renders, "waiting for a manager that offers gpu (none of cpu does; gpu is draining)"
    )
    sql(cpu, "UPDATE items SET listed_at = now() - interval '1 second'")  # (turns are over)
    assert gpu.claim(5) == [] and cpu.claim(5) == ["plain/a"]
    gpu.db.run(manager_statements.UNDRAIN, manager="gpu")
    cpu._last_settled = -1e18  # (the next settling, `UNMET_SECONDS` later)
    cpu.heartbeat_round()
    assert sql(cpu, "SELECT count(*) FROM items WHERE unmet")[0][0] == 0
    assert sorted(gpu.claim(5)) == renders
