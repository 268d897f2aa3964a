"""``python -m labqueue``: the ``labqueue`` command."""

import sys

from .cli import main

sys.exit(main())
