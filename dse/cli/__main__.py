"""``python -m dse.cli``: the ``dse`` command."""

import sys

from dse.cli import main

sys.exit(main())
