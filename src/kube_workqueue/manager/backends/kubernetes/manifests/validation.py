"""What the API server would refuse, refused before the first API call.

A pod or Job option the API server rejects would otherwise fail item after item, each with
the server's message, after the manager had started; these checks give one line naming the
flag instead, exit 2, with nothing dispatched. They follow the API server's own rules
(apimachinery's validation): DNS-1123 labels and subdomains for names, qualified names for
label and annotation keys, label values, C-like environment variable names, resource
quantities (`500m`, `1.5Gi`, `2e3`; never negative), absolute mount paths.

Each function takes the text, returns it (or its parsed form), or raises `UserError` whose
message says what is accepted; the caller names the flag.
"""

from __future__ import annotations

import re

from ....errors import UserError

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
QUANTITY = re.compile(
    r"^\+?(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)


def dns_label(text: str) -> str:
    """A namespace (or any DNS-1123 label): lower-case letters, digits, '-', at most 63."""
    if len(text) > 63 or not DNS_LABEL.match(text):
        raise UserError(
            f"not a DNS-1123 label (lower-case letters, digits and '-', at most 63): {text!r}"
        )
    return text


def dns_subdomain(text: str) -> str:
    """An object name (a claim, a service account): DNS-1123 labels joined by '.', <= 253."""
    if len(text) > 253 or not DNS_SUBDOMAIN.match(text):
        raise UserError(
            "not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253): "
            f"{text!r}"
        )
    return text


def qualified_name(text: str) -> str:
    """A label or annotation key: [prefix/]name, the name at most 63 characters."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        raise UserError(f"its prefix is not a DNS-1123 subdomain: {text!r}")
    if not name or len(name) > 63 or not NAME_PART.match(name):
        raise UserError(
            "not a qualified name (letters, digits, '-', '_', '.', starting and ending with a "
            f"letter or digit, at most 63, with an optional DNS prefix and '/'): {text!r}"
        )
    return text


def label_value(text: str) -> str:
    if len(text) > 63 or not LABEL_VALUE.match(text):
        raise UserError(
            "not a label value (letters, digits, '-', '_', '.', starting and ending with a "
            f"letter or digit, at most 63): {text!r}"
        )
    return text


def labels(pairs: dict[str, str]) -> dict[str, str]:
    for key, value in pairs.items():
        qualified_name(key)
        label_value(value)
    return pairs


def annotations(pairs: dict[str, str]) -> dict[str, str]:
    for key in pairs:
        qualified_name(key)
    return pairs


def env_names(pairs: dict[str, str]) -> dict[str, str]:
    for key in pairs:
        if not ENV_NAME.match(key):
            raise UserError(
                f"not an environment variable name (letters, digits, '_', '-', '.'): {key!r}"
            )
    return pairs


def quantity(text: str) -> str:
    """A resource quantity as the API accepts it: `500m`, `2`, `1.5Gi`, `128Mi`, `1e3`."""
    found = QUANTITY.match(text.strip())
    if found is None:
        raise UserError(
            f"not a resource quantity (e.g. 500m, 2, 256Mi, 1.5Gi): {text!r}"
            if not text.strip().startswith("-")
            else f"must not be negative: {text!r}"
        )
    if float(found["number"]) == 0:
        raise UserError(f"must be more than 0: {text!r}")
    return text.strip()


def absolute_path(text: str) -> str:
    if not text.startswith("/") or "\0" in text or ".." in text.split("/"):
        raise UserError(f"must be an absolute path without '..': {text!r}")
    return text


# An image reference as the container runtimes read it (the distribution project's grammar):
# [domain[:port]/]path[:tag][@digest], the path's components lower-case - a kubelet refuses
# anything else only when a pod starts (InvalidImageName), long after the flag was taken.
_ALNUM = r"[a-z0-9]+"
_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(
    rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@{_DIGEST})?"
)


def image(text: str) -> str:
    if len(text) > 4096 or not _IMAGE.fullmatch(text):
        raise UserError(
            "not an image reference ([registry/]name[:tag][@digest], the name lower-case, "
            f"no spaces): {text!r}"
        )
    return text
