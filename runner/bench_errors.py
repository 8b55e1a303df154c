"""The errors ``runner.bench``'s commands end with: each one line for its user and an exit code of its own."""


class BadInput(Exception):
    """Paths a command cannot compare: one line for its user, exit 2."""


class CommandFailed(Exception):
    """A run or tool a command started ended badly: one line for its user (the run's own output above it), exit 1."""
