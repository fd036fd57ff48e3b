"""The workflow tests import their recordings and stubs as top-level modules; the Temporal dev
server for the live ones is the suite's ``temporal`` fixture (tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
