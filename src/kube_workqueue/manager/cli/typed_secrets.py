"""No secret typed on a command line: every user of the machine sees a process's arguments
(`ps`, /proc/PID/cmdline) for its whole life, and a shell keeps them in its history.

A flag whose value may hold a password - a source's URL here; `--ledger` and `--ui-token` have
checks of their own - takes it only from its environment variable (`WORKQUEUE_<FLAG>`,
`cli.environment`), never typed. A variable set in the environment lets nothing in on the
command line: `environment_sources` names only values that are the variable's.
"""

from __future__ import annotations

from ..errors import UserError


def typed(args, dest: str) -> bool:
    """Whether `args.<dest>` was typed on the command line (not its environment variable's)."""
    return dest not in (getattr(args, "environment_sources", None) or {})


def no_password_in_source(args, dest: str = "source", flag: str = "--source") -> None:
    """A `UserError` when the items API URL typed for `flag` holds a password."""
    from ..fleet.address import has_password

    url = getattr(args, dest, None)
    if url and typed(args, dest) and has_password(url):
        raise UserError(
            f"{flag}: a password in the URL is visible to every user of this machine (ps): "
            "give the ambassador's credentials in ~/.netrc, or the whole URL in "
            "WORKQUEUE_SOURCE"
        )
