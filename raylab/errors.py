"""User-facing errors: one sentence naming the problem and the fix, exit code 2."""


class UserError(Exception):
    """Bad input from the user (flags, data, cluster, tracking URI). Printed without a traceback."""

    exit_code = 2
