"""Label selectors, as kube-apiserver reads them: equality- and set-based terms."""

from __future__ import annotations

import re


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality- (a=b, a==b, a!=b) and set-based (a in (x,y), a notin (x), a, !a) selectors."""
    if not selector:
        return True
    for term in _split_selector(selector):
        m = re.match(r"^(\S+)\s+(in|notin)\s+\((.*)\)$", term)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            inside = key in labels and labels[key] in values
            if (op == "in") != inside:
                return False
            continue
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", term)
        if m:
            key, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
            equal = labels.get(key) == value
            if (op == "!=") == equal:
                return False
            continue
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True
