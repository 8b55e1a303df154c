"""A ``kbench`` command's user's mistake: one line on stderr and exit code ``USER_ERROR``, before any work starts
(``cli.main``)."""

USER_ERROR = 2


class UserError(Exception):
    """What the user asked for cannot be done as asked (a configuration, a path, a GPU that is not there)."""
