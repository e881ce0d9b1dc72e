"""The placement language (`manager.placement`): Kubernetes label selectors over a manager's
offers - each operator, one text per meaning, and what is refused before anything runs."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.errors import InputError
from kube_workqueue.manager.placement import Placement, need_rule, offer, parse_need

GPU_EU = {"gpu": "a100", "region": "eu"}


@pytest.mark.parametrize(
    ("need", "text", "met"),
    [
        ("gpu", "gpu", True),
        ("region==eu", "region=eu", True),
        ("region=us", "region=us", False),
        ("spot!=true", "spot!=true", True),  # absent counts as not true
        ("zone in (b, a)", "zone in (a,b)", False),
        ("region in (us,eu)", "region in (eu,us)", True),
        ("region notin (us)", "region notin (us)", True),
        ("!spot", "!spot", True),
        ("!gpu", "!gpu", False),
        ("region=eu, gpu", "gpu,region=eu", True),  # terms sorted: one text per meaning
        ("k8s.io/arch=amd64", "k8s.io/arch=amd64", False),
    ],
)
def test_each_operator_over_the_offers(need, text, met):
    parsed = parse_need(need)
    assert parsed.text == text and parsed.met_by(GPU_EU) is met
    assert parse_need(parsed.text) == parsed  # its text reads back as itself


@pytest.mark.parametrize(
    ("need", "said"),
    [
        ("gpu>2", "unknown operator in 'gpu>2'"),
        ("gpu ~= a", "unknown operator"),
        ("gpu,", "an empty term"),
        ("zone in ()", "a set of label values"),
        ("gpu=a b", "unknown operator"),
        ("gpu,!gpu", "no manager could ever offer what 'gpu,!gpu' needs"),
        ("gpu=a100,gpu=h100", "no manager could ever offer"),
        ("zone in (a),zone notin (a)", "no manager could ever offer"),
        ("-bad", "not a label key"),
    ],
)
def test_what_does_not_parse_or_could_never_be_met_is_one_line(need, said):
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_need(need)


def test_rules_and_offers():
    glob, need = need_rule("eu-*/*=region==eu")
    assert glob == "eu-*/*" and need.text == "region=eu"
    placement = Placement([offer("gpu=a100")], [need_rule("render/*=gpu"), need_rule("*=!spot")])
    assert placement.need_of("render/a.mp4").text == "gpu"  # the first match wins
    assert placement.need_of("plain.mp4").text == "!spot"
    assert placement.meets("gpu") and not placement.meets("region=eu")
    assert not placement.meets("gpu>2")  # a text it cannot read is never met
    for bad in ("gpu", "=a", "gpu=a b"):
        with pytest.raises(InputError):
            offer(bad)
    with pytest.raises(InputError, match="wants GLOB=NEED"):
        need_rule("gpu")


def test_a_group_rule_pins_a_tenants_items_and_the_first_rule_still_wins():
    placement = Placement(
        [], [need_rule("urgent/*=gpu"), need_rule("group:eu-*=region==eu"), need_rule("*=!spot")]
    )
    assert placement.need_of("urgent/a", "eu-acme").text == "gpu"  # an earlier name rule
    assert placement.need_of("b", "eu-acme").text == "region=eu"
    assert placement.need_of("b", "us-bob").text == "!spot"
    assert placement.need_of("b").text == "!spot"  # no group: group rules pass it by


def test_a_need_from_an_items_data_is_read_as_a_rules_and_what_does_not_parse_is_met_by_none():
    from kube_workqueue.manager.placement import MAX_DATA_NEED, UNREADABLE

    placement = Placement([offer("gpu=a100")], [], from_data=True)
    assert placement.data_need("region in (ch, eu), gpu") == "gpu,region in (ch,eu)"
    assert placement.data_need(None) is None and placement.data_need("") is None
    for unreadable in ("gpu>2", ["gpu"], 7, "gpu,!gpu", "a" * (MAX_DATA_NEED + 1), "x\x1b[2J"):
        assert placement.data_need(unreadable) == UNREADABLE, unreadable
    assert not placement.meets(UNREADABLE)
    assert not Placement([offer("a=b")]).meets(UNREADABLE)  # no offers could meet it


def test_what_only_the_whole_list_shows_is_refused_before_anything_runs():
    """A key offered twice, a glob given twice (the second rule could never apply), a
    `group:` rule without a glob, more than the ledger keeps: each one line, at start."""
    from kube_workqueue.manager.placement import MAX_NEED, MAX_OFFERS, need_rules, offers

    with pytest.raises(InputError, match=r"gpu is offered twice \(a100, h100\)"):
        offers(["gpu=a100", "gpu=h100"])
    with pytest.raises(InputError, match="at most 64 offers"):
        offers([f"k{i}=v" for i in range(MAX_OFFERS + 1)])
    with pytest.raises(InputError, match="'render/\\*' is given twice"):
        need_rules(["render/*=gpu", "render/*=!spot"])
    with pytest.raises(InputError, match="group: wants a glob of groups"):
        need_rules(["group:=gpu"])
    with pytest.raises(InputError, match="at most 1,024 characters"):
        parse_need("zone in (" + ",".join(f"z{i}" for i in range(MAX_NEED)) + ")")
    assert [g for g, _ in need_rules(["a/*=gpu", "group:b=gpu"])] == ["a/*", "group:b"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--prefers", "gpu", "--prefers", "!spot"], "--prefers is given twice"),
        (["--needs", "group:eu-*=region==eu"], "a group: rule matches an item's group"),
        (["--needs-from-data"], "--needs-from-data reads a 'needs' field"),
        (["--offers", "gpu=a100", "--offers", "gpu=h100"], "gpu is offered twice"),
    ],
)
def test_placement_a_folder_could_never_use_is_one_line(tmp_path, argv, said):
    """On a folder (items without a group or data of their own) a `group:` rule and
    `--needs-from-data` would match nothing, silently: refused, as a second --prefers is."""
    from tests.fleet.test_mistakes import in_process
    from tests.manager.cli.test_user_errors import one_line_exit_2

    ledger = "postgresql://postgres@127.0.0.1:9/never_reached"
    one_line_exit_2(in_process("run", tmp_path, "--ledger", ledger, *argv, "--", "true"), said)
