"""`make bench`: every benchmark, each printing plait next to its peers measured in the same run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import agent_loop
import core_loop
import durable_loop


def main() -> None:
    core_loop.main()
    print()
    durable_loop.main(sys.argv[1:])
    print()
    agent_loop.main(sys.argv[1:])


if __name__ == "__main__":
    main()
