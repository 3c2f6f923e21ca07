"""`python -m clawloop.flows.cli ...`: the `clawloop` command."""

import sys

from clawloop.flows.cli import main

sys.exit(main())
