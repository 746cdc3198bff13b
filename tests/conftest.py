import atexit
import os
import shutil
import sys
import tempfile

import pytest

# The CUDA target's tests run in Numba's CUDA simulator unless this is set (to 0 on a
# machine with a GPU); it must be set before Numba is imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

sys.path.insert(0, os.path.dirname(__file__))

# First calls wait for their kernel (deterministic cache_info counts and results; in
# the processes that tests start too): tests of tiered calls turn jt.config.tiered on.
os.environ["JITTAPE_TIERED"] = "0"

# jittape's own helpers (the matrix products: about 20 s of compile per dtype) are
# compiled once per machine into a folder of the temp directory that every test process
# shares, never into the package or the user's cache (codegen/helpers_cache.py)
os.environ.setdefault("JITTAPE_HELPERS_DIR", os.path.join(
    tempfile.gettempdir(), f"jittape-test-helpers-{os.getuid() if hasattr(os, 'getuid') else 0}"))

# Compiled functions go to a disk cache of this test process, never the user's
# (~/.cache/jittape): tests that need their own take the ``cache_dir`` fixture.
_CACHE = tempfile.mkdtemp(prefix="jittape-tests-")
os.environ["JITTAPE_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh ``JITTAPE_CACHE_DIR`` for the test (the files that compile use it for
    every test: ``pytestmark = [..., pytest.mark.usefixtures("cache_dir")]``)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(path))
    return path


# Hypothesis keeps no example database, and its other files (a cache of constants) go
# to the temp directory, not into the working tree; the property tests are
# derandomized or print what reproduces a failure instead.
from hypothesis import settings as _hypothesis_settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "jittape-hypothesis"))
_hypothesis_settings.register_profile("jittape", database=None)
_hypothesis_settings.load_profile("jittape")
