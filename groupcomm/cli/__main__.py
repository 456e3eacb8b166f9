"""``python -m groupcomm.cli``: the same as the ``groupcomm`` console script."""

from groupcomm.cli.main import entry

entry()
