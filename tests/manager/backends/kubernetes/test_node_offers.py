"""Which nodes a manager's worker pods may use, and what all of them say (`node_offers`): the
scheduler's rules for node selectors, cordons and taints, as the API reference gives them."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.kubernetes.node_offers import facts, pin, tolerated, usable

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    "toleration, tolerates",
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # Equal by default; any effect
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # no key, Exists: everything
        ({"key": "dedicated", "value": "cpu"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_a_taint_is_tolerated_as_the_scheduler_judges_it(toleration, tolerates):
    assert tolerated(TAINT, [toleration]) is tolerates


def test_a_node_is_usable_when_it_matches_is_not_cordoned_and_its_hard_taints_are_tolerated():
    def node(labels, **spec):
        return {"metadata": {"labels": labels}, "spec": spec}

    assert usable(node({"pool": "a", "x": "y"}), {"pool": "a"}, [])
    assert not usable(node({"pool": "b"}), {"pool": "a"}, [])
    assert not usable(node({"pool": "a"}, unschedulable=True), {"pool": "a"}, [])
    assert not usable(node({}, taints=[TAINT]), {}, [])
    assert usable(node({}, taints=[TAINT]), {}, [{"key": "dedicated", "operator": "Exists"}])
    soft = {"key": "k", "effect": "PreferNoSchedule"}  # only a preference: the pod may go there
    assert usable(node({}, taints=[soft]), {}, [])


def test_a_label_is_offered_only_when_every_usable_node_has_it_with_one_value():
    nodes = [{"metadata": {"labels": {"gpu": "a100", "zone": "a", "spot": "true"}}},
             {"metadata": {"labels": {"gpu": "a100", "zone": "b"}}}]  # fmt: skip
    offered, why = facts(nodes, ["gpu", "zone", "spot", "absent"])
    assert offered == {"gpu": "a100"}
    assert why == {"zone": "the nodes its Jobs may use disagree (a, b)",
                   "spot": "1 of the 2 nodes its Jobs may use lack it",
                   "absent": "2 of the 2 nodes its Jobs may use lack it"}  # fmt: skip
    assert facts([], ["gpu"]) == ({}, {"gpu": "no node its Jobs may use"})


def test_nodes_that_cannot_be_listed_say_why_the_rights_or_the_server():
    """A 403 names the service account's missing right; an API server that does not answer
    names that - it was blamed on RBAC too."""
    from types import SimpleNamespace

    from kube_workqueue.manager.backends.kubernetes.client.api import KubeError, KubeUnavailable
    from kube_workqueue.manager.errors import UserError

    pod = SimpleNamespace(node_selector=None, tolerations=None)
    for raised, said in (
        (KubeError(403, "Forbidden", "nodes is forbidden"), "needs list on nodes"),
        (
            KubeUnavailable(
                503, "ServiceUnavailable", "list nodes failed after 4 tries (Connection refused)"
            ),
            "the API server does not answer",
        ),  # fmt: skip
    ):

        def refused(kind, raised=raised):
            raise raised

        with pytest.raises(UserError, match=said) as told:
            pin(SimpleNamespace(list=refused), pod, ["gpu"], {})
        assert ("service account" in str(told.value)) is (raised.status == 403)
