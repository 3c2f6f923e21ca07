"""Fixtures shared by the flow tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """A temporary Prefect server and home for one test module (Prefect's test harness)."""
    home = tmp_path_factory.mktemp("prefect-home")
    mp = pytest.MonkeyPatch()
    mp.setenv("PREFECT_HOME", str(home))
    mp.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    mp.setenv("PREFECT_LOCAL_STORAGE_PATH", str(home / "storage"))
    from prefect.events.worker import EventsWorker
    from prefect.testing.utilities import prefect_test_harness

    # A cached events worker keeps the API URL it started with: one started by an earlier test's
    # run on Prefect's temporary server (flows.pipeline.api_for_workers) would send this module's
    # events there, and the task runs of this process would be missing from this server.
    EventsWorker.drain_all()
    with prefect_test_harness(server_startup_timeout=60):
        yield
    mp.undo()
