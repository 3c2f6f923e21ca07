"""Prefect flows (loop -> iteration -> one flow per stage) and the `clawloop` CLI."""

import os

# Prefect's temporary server would try to send usage telemetry; these machines are often offline,
# where that only logs a scary ERROR line. Users can still opt in by setting the variable.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Our modules' logs go to the Prefect UI inside flow runs; outside one (`--no-prefect`, tests)
# they only go to the terminal, without a warning per line.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
# The temporary server's first start on a new machine builds its database; on 2 busy cores that
# outlasted Prefect's 20 s default and `make run` died with "Timed out while attempting to connect
# to ephemeral Prefect API server" (seen 2026-12-06; a second start took seconds).
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
