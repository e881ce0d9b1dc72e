"""Placement: what a manager offers and what an item needs, so that a fleet on one shared
ledger runs each item only where it may run.

    --offers gpu=a100 --offers region=eu        a manager's attributes (KEY=VALUE, repeatable)
    --needs 'render/*=gpu'                      items whose name matches the glob need this
    --needs 'eu-*/*=region==eu,spot!=true'      (repeatable; the first glob that matches wins)
    --needs 'group:eu-*=region==eu'             (`group:GLOB`: the item's group - a tenant - not
                                                its name: a tenant's items pinned)
    --prefers 'spot!=true' --spill-after 2m     managers whose offers meet it have every item
                                                first; the others take one that waited 2m

A need is a Kubernetes label selector over the offers - the language platform engineers write
already, and no more: terms joined by commas, all of which must hold -

    key=value, key==value     offered, with that value
    key!=value                not offered with that value (absent counts)
    key in (a,b)              offered with one of these values
    key notin (a,b)           not offered with any of them (absent counts)
    key                       offered, with any value
    !key                      not offered

Nothing else is taken: another operator (`gpu>2`, `gpu~=a`), a key or value outside the label
alphabet, an empty term, or a need no offers at all could satisfy (`gpu,!gpu`) is an
`InputError` naming it, before anything is claimed.

`Need.text` is the need written one way (terms sorted, values sorted): two rules that mean the
same interning to one id in the ledger (`fleet.statements.NEEDS`). Pure functions and values:
no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import InputError
from .patterns import compile_globs, first_glob
from .priority_rules import unclosed_bracket

# the need of an item whose data's `needs` does not parse: not the language, so no offers meet
# it (`Placement.meets`), and what `status` shows as the need it waits for
UNREADABLE = "(needs in its data that do not parse)"
# A need is held by the shared ledger whole, once, under a unique index (`needs.expr`), whose
# rows PostgreSQL's B-tree caps at 2,704 bytes: a need of at most this many characters (label
# characters, one byte each) always fits - `--needs`, `--prefers` and a data's `needs` alike.
MAX_NEED = 1024
MAX_DATA_NEED = MAX_NEED  # characters of a data's `needs` read at most
MAX_OFFERS = 64  # attributes one manager offers (its row's `offers`, matched at every claim)
MAX_RULES = 256  # --needs rules (each item's name is matched against them in order)
GROUP_PREFIX = "group:"  # a rule's glob over the item's group (a tenant), not its name

# a label's name (an optional DNS prefix and `/`) and value, as Kubernetes allows them
KEY = r"(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_KEY = re.compile(rf"^{KEY}$")
_VALUE = re.compile(rf"^{VALUE}$")
_SET = re.compile(rf"^\s*({KEY})\s+(in|notin)\s+\(([^()]*)\)\s*$")
_COMPARE = re.compile(rf"^\s*({KEY})\s*(==|=|!=)\s*([^\s]*)\s*$")
_OPERATOR_CHARS = re.compile(r"[<>~=!]")


@dataclass(frozen=True, order=True)
class Term:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "absent"
    values: tuple[str, ...] = ()

    def holds(self, offers: Mapping[str, str]) -> bool:
        value = offers.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "absent":
            return value is None
        if self.op in ("=", "in"):
            return value in self.values
        return value not in self.values  # "!=", "notin": absent counts

    @property
    def text(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "absent":
            return f"!{self.key}"
        if self.op in ("=", "!="):
            return f"{self.key}{self.op}{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(self.values)})"


@dataclass(frozen=True)
class Need:
    terms: tuple[Term, ...]

    @property
    def text(self) -> str:
        return ",".join(term.text for term in self.terms)

    def met_by(self, offers: Mapping[str, str]) -> bool:
        return all(term.holds(offers) for term in self.terms)


def _split_terms(text: str) -> list[str]:
    """The terms of a selector: commas split them, except inside `in (...)`."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _term(text: str, whole: str) -> Term:
    word = text.strip()
    if not word:
        raise InputError(f"an empty term in the need {whole!r}")
    found = _SET.match(word)
    if found:
        values = tuple(sorted({v.strip() for v in found.group(3).split(",")}))
        if not values or not all(v and _VALUE.match(v) for v in values):
            raise InputError(f"a set of label values, e.g. 'zone in (a,b)': {word!r}")
        return Term(found.group(1), found.group(2), values)
    found = _COMPARE.match(word)
    if found:
        key, op, value = found.group(1), found.group(2), found.group(3)
        if not _VALUE.match(value):
            raise InputError(f"not a label value: {value!r} in {word!r}")
        return Term(key, "=" if op == "==" else op, (value,))
    if word.startswith("!") and _KEY.match(word[1:].strip()):
        return Term(word[1:].strip(), "absent")
    if _KEY.match(word):
        return Term(word, "exists")
    if _OPERATOR_CHARS.search(word) or " " in word:
        raise InputError(
            f"unknown operator in {word!r}: a need is key=value, key!=value, key in (a,b), "
            "key notin (a,b), key or !key, joined by commas"
        )
    raise InputError(f"not a label key: {word!r}")


def parse_need(text: str) -> Need:
    """A need (the module docstring); `InputError` when it does not parse, is longer than the
    shared ledger can index (`MAX_NEED`), or no offers could ever meet it."""
    if len(text) > MAX_NEED:
        raise InputError(
            f"a need is at most {MAX_NEED:,} characters (the shared ledger indexes each need "
            f"whole, and PostgreSQL's index rows hold 2,704 bytes): this one has {len(text):,}"
        )
    terms = tuple(sorted({_term(part, text) for part in _split_terms(text)}))
    need = Need(terms)
    if not possible(need):
        raise InputError(f"no manager could ever offer what {text!r} needs")
    return need


def possible(need: Need) -> bool:
    """Whether some offers meet `need`: per key, absent or one of the values its terms name,
    or a value none names (each tried)."""
    by_key: dict[str, list[Term]] = {}
    for term in need.terms:
        by_key.setdefault(term.key, []).append(term)
    for key, terms in by_key.items():
        named = {v for term in terms for v in term.values}
        candidates: list[str | None] = [None, *sorted(named), "\x00unnamed"]
        if not any(all(t.holds({} if v is None else {key: v}) for t in terms)
                   for v in candidates):  # fmt: skip
            return False
    return True


def need_rule(text: str) -> tuple[str, Need]:
    """`GLOB=NEED` (`--needs`): the glob is everything before the first `=`."""
    glob, sep, need = text.partition("=")
    if not sep or not glob.strip() or not need.strip():
        raise InputError(f"wants GLOB=NEED (for example 'render/*=gpu'): {text!r}")
    if not glob.strip().removeprefix(GROUP_PREFIX):
        raise InputError(f"group: wants a glob of groups after it ('group:eu-*=region==eu'): "
                         f"{text!r}")  # fmt: skip
    if unclosed_bracket(glob):
        raise InputError(f"the glob has a [ that nothing closes: {text!r}")
    return glob.strip(), parse_need(need)


def need_rules(words: Iterable[str]) -> list[tuple[str, Need]]:
    """Every `--needs GLOB=NEED`, and what only the whole list shows: a glob given twice (the
    second rule could never match: the first wins), more than MAX_RULES rules."""
    rules = [need_rule(word) for word in words]
    if len(rules) > MAX_RULES:
        raise InputError(f"at most {MAX_RULES} need rules, not {len(rules)}")
    seen: set[str] = set()
    for glob, _ in rules:
        if glob in seen:
            raise InputError(f"the glob {glob!r} is given twice: the first rule that matches "
                             "wins, so the second would never apply - give it once")  # fmt: skip
        seen.add(glob)
    return rules


def offers(words: Iterable[str]) -> list[tuple[str, str]]:
    """Every `--offers KEY=VALUE`, and what only the whole list shows: a key offered twice (a
    manager offers one value a key: `gpu=a100` and `gpu=h100` would leave one of them unsaid),
    more than MAX_OFFERS."""
    found = [offer(word) for word in words]
    if len(found) > MAX_OFFERS:
        raise InputError(f"at most {MAX_OFFERS} offers, not {len(found)}")
    given: dict[str, str] = {}
    for key, value in found:
        if key in given:
            raise InputError(f"{key} is offered twice ({given[key]}, {value}): a manager offers "
                             "one value a key - run one manager per value, or name the keys "
                             "apart (gpu.a100=true)")  # fmt: skip
        given[key] = value
    return found


def offer(text: str) -> tuple[str, str]:
    """`KEY=VALUE` (`--offers`): a label's key and value."""
    key, sep, value = text.partition("=")
    if not sep or not _KEY.match(key.strip()) or not _VALUE.match(value.strip()):
        raise InputError(f"wants KEY=VALUE with label characters (for example gpu=a100): {text!r}")
    return key.strip(), value.strip()


def label_key(text: str) -> str:
    """`KEY` (`--offers-node-label`): a label's key, as Kubernetes allows it."""
    if not _KEY.match(text.strip()):
        raise InputError(f"wants a node label's key (for example "
                         f"topology.kubernetes.io/region): {text!r}")  # fmt: skip
    return text.strip()


class Placement:
    """A manager's offers and the queue's need rules, as the ledger uses them; `prefers`: the
    managers the queue prefers (whose offers meet it) have each item first, the others only
    once it has waited `spill_after` seconds."""

    def __init__(self, offers: Iterable[tuple[str, str]] = (),
                 needs: Iterable[tuple[str, Need]] = (), prefers: Need | None = None,
                 spill_after: float = 0.0, from_data: bool = False) -> None:  # fmt: skip
        self.offers: dict[str, str] = dict(offers)
        self.from_data = from_data  # an item no rule matches: its data's `needs` (`data_need`)
        # (by group, the glob's pattern, the need), in the order given: the first match wins
        self.rules = [
            (glob.startswith(GROUP_PREFIX),
             compile_globs([glob.removeprefix(GROUP_PREFIX)]), need)
            for glob, need in needs
        ]  # fmt: skip
        self.prefers = prefers
        self.spill_after = spill_after

    @property
    def preferred(self) -> bool:
        """Whether this manager is one the queue prefers (with no preference, every one is)."""
        return self.prefers is None or self.prefers.met_by(self.offers)

    def need_of(self, name: str, group: str | None = None) -> Need | None:
        """The need of the first rule whose glob matches `name` - or, a `group:` rule, the
        item's `group` - or None (any manager)."""
        for by_group, pattern, need in self.rules:
            said = group if by_group else name
            if said is not None and first_glob(pattern, said) is not None:
                return need
        return None

    def data_need(self, said: object) -> str | None:
        """The need an item's data says (`needs`, `--needs-from-data`), as the ledger holds
        it: None when it says none; `UNREADABLE` - which no offers meet - when it says one
        that does not parse (not a string, too long, not the language, or one no offers
        could ever meet): such an item waits, and `status` says why, instead of running
        anywhere."""
        if said is None or said == "":
            return None
        if not isinstance(said, str) or len(said) > MAX_DATA_NEED:
            return UNREADABLE
        try:
            need = parse_need(said)
        except InputError:
            return UNREADABLE
        return need.text if possible(need) else UNREADABLE

    def meets(self, need_text: str) -> bool:
        """Whether this manager's offers meet a need as the ledger holds it (its text). A text
        that no longer parses (a rule of a newer version) is not met: never run blind."""
        try:
            return parse_need(need_text).met_by(self.offers)
        except InputError:
            return False
