import sys
from pathlib import Path

# The agent module sits beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
