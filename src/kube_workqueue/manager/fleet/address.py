"""A shared ledger's address: its URL checked, the PostgreSQL schema it names, and the URL as
it may be printed.

    postgresql://user@host:5432/db[?schema=NAME]
        the password from the environment (PGPASSWORD) or a file (PGPASSFILE, ~/.pgpass), as
        libpq reads them; `schema` (as Prisma's URLs name it) is the PostgreSQL schema the
        ledger's tables live in - `workqueue` by default - so a queue shares a database with
        other applications safely; every other query parameter is libpq's own

`address(url)` checks it once - a URL that is not PostgreSQL's, names no database, carries an
option libpq does not know or a schema PostgreSQL would not take unquoted is an `InputError`
naming what is wrong - and `Address` is what the connections use (`database.Database`): the
conninfo handed to libpq (without our `schema`), the schema, and `where`, the URL shown.

`shown(url)` is the URL with any password (`user:PASSWORD@`, `?password=`) replaced by `***`:
what logs, `status` and errors print; `has_password(url)` says whether there is one to hide (a
password typed on the command line is refused: `cli.typed_secrets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..errors import InputError, UserError

SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "workqueue"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_$]{0,62}")


@dataclass(frozen=True)
class Address:
    """A checked shared-ledger URL: what libpq connects to (`conninfo`, without our
    `schema`), the schema, and the URL as it may be printed."""

    url: str
    conninfo: str
    schema: str
    where: str


def check_url(text: str) -> str:
    """A shared ledger's URL, checked (see `address`); the URL itself."""
    return address(text).url


def address(text: str) -> Address:
    """`text` checked: `postgresql://…` naming a database, options libpq knows, a schema name
    PostgreSQL takes unquoted. An `InputError` naming what is wrong, never the password."""
    url = text.strip()
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": a bracket without its pair
        raise InputError(f"not a URL ({exc}): {shown(url)}") from None
    if parts.scheme not in SCHEMES:
        raise InputError(f"not a PostgreSQL URL (postgresql://user@host/database): {shown(url)}")
    if not parts.path.strip("/"):
        raise InputError(f"name the database (postgresql://host/NAME): {shown(url)}")
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise InputError(f"the port is not a number: {shown(url)}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = DEFAULT_SCHEMA
    rest = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            rest.append((key, value))
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InputError(
            f"schema={schema!r}: a schema name is lower-case letters, digits and _ "
            "(up to 63), not starting with a digit"
        )
    if schema.startswith("pg_") or schema == "information_schema":
        raise InputError(
            f"schema={schema}: that is PostgreSQL's own (the pg_ names and "
            "information_schema): name a schema of the ledger's own, or leave it out"
        )
    # (built by hand: urlunsplit writes `postgresql:///db` - the local socket - as
    # `postgresql:/db`, which libpq reads otherwise)
    query_text = urlencode(rest, quote_via=quote)  # (a space is %20: libpq reads + as +)
    conninfo = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{query_text}" if rest else "")
    conninfo_to_dict = driver().conninfo.conninfo_to_dict
    try:
        conninfo_to_dict(conninfo)
    except Exception as exc:  # psycopg.ProgrammingError: an option libpq does not know
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{first.replace('URI', 'URL')}: {shown(url)}") from None
    return Address(url, conninfo, schema, shown(url))


def has_password(url: str) -> bool:
    """Whether `url` carries a password (`user:PASSWORD@` or `?password=`); a URL that cannot
    be parsed is judged by its text."""
    try:
        parts = urlsplit(url.strip())
        if parts.password is not None:
            return True
        return any(k == "password" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    except ValueError:
        return bool(re.search(r"//[^/@]*:[^/@]*@|[?&]password=", url))


def shown(url: str) -> str:
    """`url` as it may be printed: any password replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL: whatever looks like a password is hidden all the same
        url = re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)
        return re.sub(r"([?&]password=)[^&]*", r"\1***", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    shown_url = urlunsplit(parts._replace(netloc=netloc, query=query))
    if not netloc and url.startswith(f"{parts.scheme}://"):  # (`postgresql:///db`: kept so)
        shown_url = shown_url.replace(f"{parts.scheme}:", f"{parts.scheme}://", 1)
    return shown_url


def driver():
    """psycopg, imported when a ledger is first used - a `UserError` saying how to install it
    when it is missing."""
    try:
        import psycopg
        import psycopg.conninfo  # noqa: F401 - (address() checks URLs with it)
    except ImportError:
        raise UserError(
            "a shared ledger needs the PostgreSQL driver: pip install 'kube-workqueue[postgresql]'"
        ) from None
    return psycopg
