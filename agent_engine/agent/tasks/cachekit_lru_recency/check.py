"""Runs the test suite under tests/; exits 0 exactly when every test ran and passed (none skipped).

The repository goes on sys.path after the standard library, so that no file in it can shadow a
module the suite imports from there.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE] + [HERE]

import unittest  # noqa: E402

suite = unittest.defaultTestLoader.discover(os.path.join(HERE, "tests"), top_level_dir=HERE)
result = unittest.TextTestRunner(verbosity=1).run(suite)
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 and not result.skipped else 1)
