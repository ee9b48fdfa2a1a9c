"""A command tool (JSON on stdin, JSON on stdout) that counts itself like counted.py."""

import json
import os
import sys

data = json.load(sys.stdin)
with open(os.environ["CRASHMATRIX_COUNT"], "a") as f:
    f.write(f"{os.environ['PLAIT_IDEMPOTENCY_KEY']} {os.environ['PLAIT_TOOL_NAME']}\n")
json.dump({"left": "done", "seen": sorted(data)}, sys.stdout)
