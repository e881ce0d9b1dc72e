"""CEL validation rules of a CustomResourceDefinition (`x-kubernetes-validations`), evaluated as
kube-apiserver evaluates them: at every schema node that carries rules and is present in the
object, `self` bound to that node's value; a rule that is false, or that fails to evaluate (a
type error, a bad conversion), refuses the write with its `message` (else "failed rule:
RULE") at the node's field path (the Kubernetes documentation, "Validation rules").

The evaluator is cel-python (`celpy`), the CEL reference semantics in Python, plus the
functions of Kubernetes' CEL strings library the chart's rules use (`lastIndexOf`, `substring`,
`indexOf`, `lowerAscii`, `trim`; "Kubernetes CEL libraries" in the same documentation).
Transition rules (`oldSelf`) are not supported: the chart has none, and a rule naming `oldSelf`
is refused here so that adding one fails loudly rather than passing unchecked.
"""

from __future__ import annotations

import functools

import celpy
from celpy import celtypes


def _last_index_of(text, sub):
    return celtypes.IntType(str(text).rfind(str(sub)))


def _index_of(text, sub):
    return celtypes.IntType(str(text).find(str(sub)))


def _substring(text, start, end=None):
    text, start = str(text), int(start)
    if not 0 <= start <= len(text) or (end is not None and not start <= int(end) <= len(text)):
        raise ValueError(f"substring({start}, {end}) out of range for {text!r}")
    return celtypes.StringType(text[start:] if end is None else text[start : int(end)])


FUNCTIONS = {
    "lastIndexOf": _last_index_of,
    "indexOf": _index_of,
    "substring": _substring,
    "lowerAscii": lambda text: celtypes.StringType(str(text).lower()),
    "trim": lambda text: celtypes.StringType(str(text).strip()),
}


@functools.lru_cache(maxsize=256)
def compiled(rule: str):
    """The program of one rule (compiled once)."""
    if "oldSelf" in rule:
        raise ValueError(f"transition rules are not supported by the stand-in: {rule}")
    environment = celpy.Environment()
    return environment.program(environment.compile(rule), functions=FUNCTIONS)


def holds(rule: str, value) -> bool:
    """Whether `rule` holds with `self` bound to `value` (JSON); a rule that cannot be
    evaluated does not hold."""
    try:
        result = compiled(rule).evaluate({"self": celpy.json_to_cel(value)})
    except Exception:  # celpy raises its own kinds, and Python's from the functions above
        return False
    return result is True or (isinstance(result, celtypes.BoolType) and bool(result))


def broken_rules(schema: dict, value, where: str) -> list[str]:
    """The rules at this node that `value` breaks, as API-server messages."""
    problems = []
    for entry in schema.get("x-kubernetes-validations") or ():
        if not holds(entry["rule"], value):
            message = entry.get("message") or f"failed rule: {entry['rule']}"
            problems.append(f"{where or '<root>'}: Invalid value: {message}")
    return problems
