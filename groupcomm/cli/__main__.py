"""``python -m groupcomm.cli``: the same as the ``groupcomm`` console script."""

import sys

from groupcomm.cli.main import main

sys.exit(main())
