"""`workqueue ledger check|backup|restore`: the local ledger's own care.

    workqueue ledger check   [--state-dir DIR]     the checks a manager runs at start, now
    workqueue ledger backup  [--state-dir DIR]     a consistent copy into DIR/backups/
    workqueue ledger restore [--state-dir DIR] [--from FILE]
                                                   the newest sound backup (or FILE) back in
                                                   place; the damaged file is kept aside
    workqueue ledger migrate [--state-dir DIR] --to postgresql://…
                                                   the ledger copied into a shared one, what
                                                   ran kept as run (`manager.fleet.migrate`)

A damaged ledger is one line and exit 2 on every command; `restore` recovers it without running
any succeeded item again (the record of what ran comes back with it).
"""

from __future__ import annotations

import argparse

from ..backends.local import DEFAULT_STATE_DIR


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("ledger", help="check, back up, restore or migrate the local ledger")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("check", "check the ledger as a manager does at start"),
        ("backup", "back the ledger up now"),
        ("restore", "put the newest sound backup (or --from FILE) in place"),
        ("migrate", "copy the ledger into a shared one (--to postgresql://…)"),
    ):
        a = actions.add_parser(name, help=text, description=text)
        a.add_argument(
            "--state-dir",
            default=None,
            help=f"ledger and logs (default {DEFAULT_STATE_DIR})",
        )
        if name == "restore":
            a.add_argument("--from", dest="source", metavar="FILE", help="a backup to restore")
        if name == "migrate":
            a.add_argument(
                "--to", dest="target", metavar="URL", required=True, type=_shared_url,
                help="the shared ledger (postgresql://user@host/db; the password from "
                "PGPASSWORD or a PGPASSFILE)",
            )  # fmt: skip
        a.set_defaults(func=run)


def _shared_url(text: str) -> str:
    from ..errors import UserError
    from ..fleet.address import check_url, has_password

    if has_password(text):
        raise argparse.ArgumentTypeError(
            "a password on the command line is visible to every user of this machine (ps): "
            "give it in PGPASSWORD or a PGPASSFILE (~/.pgpass)"
        )
    try:
        return check_url(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args) -> int:
    import os

    from ..backends.local import care as local
    from ..errors import UserError

    if args.state_dir is None:
        if os.environ.get("WORKQUEUE_LEDGER") and args.action != "migrate":
            raise UserError(
                f"`workqueue ledger {args.action}` cares for a local ledger (a state "
                "directory), and WORKQUEUE_LEDGER names a shared one: PostgreSQL's own tools "
                "back that up (pg_dump); give --state-dir to mean a local one"
            )
        args.state_dir = DEFAULT_STATE_DIR

    if args.action == "check":
        print(local.check_ledger(args.state_dir))
    elif args.action == "backup":
        print(local.backup_ledger(args.state_dir))
    elif args.action == "migrate":
        print(local.migrate_ledger(args.state_dir, args.target))
    else:
        print(local.restore_ledger(args.state_dir, args.source))
    return 0
