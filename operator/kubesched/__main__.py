"""``python -m kubesched``: the same as the ``kubesched`` command."""

import sys

try:
    from kubesched.cli import main
except KeyboardInterrupt:  # Ctrl-C before main() runs (a slow start): as main() ends it
    sys.exit(130)

sys.exit(main())
