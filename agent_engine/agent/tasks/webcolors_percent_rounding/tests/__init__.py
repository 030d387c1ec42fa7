import os
import sys

# src layout: the tests import the package from src/ (what pytest gets from an installed package)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

