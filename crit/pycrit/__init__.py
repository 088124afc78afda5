# pycrit: the Python package behind crit, the CRIU image tool. CritError is the one
# exception its modules raise for bad input; crit prints its text as one line, exit 1.

VERSION = "0.1"


class CritError(Exception):
    """A bad image, bad JSON or a missing file: the message says which and where."""
