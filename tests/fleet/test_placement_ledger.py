"""Placement in the shared ledger itself (`manager.fleet.placed`), on a real PostgreSQL: an
item's need recorded by its id, claims that take only what this manager's offers meet (a need
recorded after its last look included once it looks again), and the count of what waits for a
manager no live one is - the `workqueue_items_unmet` metric."""

from __future__ import annotations

from kube_workqueue.manager.placement import Placement, need_rule, offer
from kube_workqueue.manager.views.observe import ClaimsCollector

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
    import psycopg

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
