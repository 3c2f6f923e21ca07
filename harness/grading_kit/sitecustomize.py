"""Put back the folder of a script run by path, which PYTHONSAFEPATH=1 leaves off sys.path.

The grading environment (harness/taskenv.py) sets PYTHONSAFEPATH=1 so that `python3 -c`,
`python3 -m` and `python3 -` never import from the current folder (the agent's workspace): a
`json.py` or `pytest.py` planted there would run inside the grader. That setting also drops the
script's own folder, which a verifier's `python3 /tests/check.py` may need for its helpers; this
file, first on PYTHONPATH, adds it back.
"""

import os
import sys

_argv0 = sys.argv[0] if sys.argv else ""
if _argv0 and _argv0 not in ("-c", "-m", "-") and os.path.isfile(_argv0):
    sys.path.insert(0, os.path.dirname(os.path.realpath(_argv0)))
