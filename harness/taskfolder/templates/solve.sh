#!/bin/bash
# Reference solution: the generator's own solve(), run against the task's workspace.
set -euo pipefail
cd /workspace
python3 -I -S -c '
import importlib.util as u
spec = u.spec_from_file_location("generator", "/solution/generator.py")
mod = u.module_from_spec(spec)
spec.loader.exec_module(mod)
mod.solve("/workspace")
'
