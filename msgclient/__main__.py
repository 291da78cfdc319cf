"""``python -m msgclient``: the ``msgclient`` command (msgclient/cli)."""

import sys

from msgclient.cli import main

if __name__ == "__main__":
    sys.exit(main())
