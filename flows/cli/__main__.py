"""`python -m clawloop.flows.cli ...`: the same as the `clawloop` command."""

import sys

from clawloop.flows.cli import main

sys.exit(main())
