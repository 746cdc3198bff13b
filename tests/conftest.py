import os
import sys

# The CUDA target's tests run in Numba's CUDA simulator unless this is set (to 0 on a
# machine with a GPU); it must be set before Numba is imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

sys.path.insert(0, os.path.dirname(__file__))
