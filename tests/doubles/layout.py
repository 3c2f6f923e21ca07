"""The project's package folders, highest floor first (tests/tasks/test_layout.py ranks them):
the one list the tests that walk or copy the tree use."""

PACKAGES = (
    "flows",
    "tasks",
    "diagnosis",
    "synthesis",
    "generators",
    "harness",
    "training",
    "storage",
)
