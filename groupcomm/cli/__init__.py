"""The ``groupcomm`` command line: :mod:`~groupcomm.cli.main` dispatches the first word to
one module per subcommand group; :mod:`~groupcomm.cli.args` holds the argument handling
they share (one clear line and exit code 2 for bad arguments).
"""

from groupcomm.cli.main import main

__all__ = ["main"]
