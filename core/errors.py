"""The one error type of the core. Messages name the object and say what to do."""


class CoreError(Exception):
    """Bad input or an impossible request detected by the core.

    The bridge and the operators turn it into a one-line report; the batch command exits non-zero with it.
    """
