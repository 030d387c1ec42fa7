"""``scheduler`` and ``estimator`` import neither torch, transformers nor fastapi (fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import importlib, json, pkgutil, sys
heavy = ("torch", "transformers", "fastapi")
imported = []
for pkg_name in ("scheduler", "estimator"):
    pkg = importlib.import_module(pkg_name)
    imported.append(pkg_name)
    for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
print(json.dumps({"imported": imported, "heavy": bad}))
"""


def test_scheduler_and_estimator_import_no_heavy_modules() -> None:
    res = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert "estimator.estimator" in report["imported"] and "scheduler.pins" in report["imported"]
    assert report["heavy"] == [], f"heavy modules imported: {report['heavy']}"
