"""Secrets never printed: the credentials a URL may carry, hidden wherever a line is written for
people or machines to read.

Users put credentials in URLs because every client accepts them there: `http://admin:pw@host`,
`redis://:password@host:6379/0`, `https://store/obj?X-Amz-Signature=…&token=…`. A manager that
prints its `--source` as written puts the password in every log line that names the source, in
`--once` errors and in `status`. So:

    userinfo         `scheme://user:***@host` (a user name alone may itself be a token:
                     `scheme://***@host`)
    query values     of secret-looking keys - password, token, secret, key, signature,
                     credential, auth, sas, X-Amz-Signature / -Credential / -Security-Token
                     and their kin - become `***`; other keys (`set=videos`) stay readable

`redact_url` does one URL; `redact_text` every URL inside a text (a log line, an error);
`RedactingFilter` is installed on every log handler the commands configure (`logs.py`), so a
library's message that quotes a URL is covered too. The ambassador and the manager both
import these from here.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

HIDDEN = "***"
SECRET_KEY = re.compile(
    r"(?i)^(x-amz-(signature|credential|security-token)|.*(pass(word|wd)?|pwd|secret|token|"
    r"api[-_]?key|access[-_]?key|private[-_]?key|signature|sig|credential|auth|sas)|key)$"
)
URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")


# `user:password@` typed with a `/` in the password (an Azure account key is base64: `+`, `/`
# and `=`): no URL parser takes it for userinfo - the authority ends at the first `/` - so the
# key would be printed back as a path. A `:` before an `@` ahead of any `?` or `#` is taken
# for one (a path `user@example.com` has no `:`, and stays).
SLASHED_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://)([^@?#\s:/]*):[^@?#\s]*@")


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret-looking query values hidden."""
    slashed = SLASHED_USERINFO.match(url)
    if slashed and "/" in url[slashed.end(2) : slashed.end()]:
        url = f"{slashed.group(1)}{slashed.group(2)}:{HIDDEN}@{url[slashed.end() :]}"
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed (an unclosed IPv6 bracket): hide what looks like userinfo
        return re.sub(r"(://)[^/@\s]*@", rf"\1{HIDDEN}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{HIDDEN}@{host}" if colon else f"{HIDDEN}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_KEY.match(k) for k, _ in pairs):
            query = urlencode([(k, HIDDEN if SECRET_KEY.match(k) else v) for k, v in pairs],
                              safe="*")  # fmt: skip
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Every URL in `text` redacted (`redact_url`); the rest as it was."""
    if "://" not in text:
        return text
    return URL.sub(lambda m: redact_url(m.group(0)), text)


class RedactingFilter(logging.Filter):
    """Log records with their URLs' secrets hidden (the message formatted first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True
