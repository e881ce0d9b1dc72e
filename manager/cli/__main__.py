"""`python -m manager.cli` is the `workqueue` command."""

import sys

from .main import main

sys.exit(main())
