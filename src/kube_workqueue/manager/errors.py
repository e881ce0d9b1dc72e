"""The one error a person can fix: `UserError`.

Raised anywhere - an option the backend cannot use, a state directory another manager holds, a
source that does not speak the protocol - it reaches `manager.cli.main`, which prints it as one
line (`workqueue COMMAND: error: MESSAGE`) and exits 2. Its message names the problem and, where
there is one, what to do; it never needs a traceback to be understood.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit code 2."""


class InputError(UserError, ValueError):
    """A value that cannot be used (a duration, a rate, a utilization): a `UserError` that is
    also a `ValueError`, so argparse types and plain callers may catch either."""
