"""``python -m kubesched``: the same as the ``kubesched`` command."""

import sys

from kubesched.cli import main

sys.exit(main())
