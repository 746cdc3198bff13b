"""Run-time configuration: ``jt.config.disk_cache`` and the cache directory.

``JITTAPE_CACHE_DIR`` (read at each compile) names the disk cache; unset, it is the
user cache directory (``$XDG_CACHE_HOME/jittape`` or ``~/.cache/jittape``); set to the
empty string, or with ``jt.config.disk_cache = False``, nothing is written to disk.
"""

import os

disk_cache = True


def cache_dir():
    """The disk cache directory, or None when the disk cache is off."""
    if not disk_cache:
        return None
    path = os.environ.get("JITTAPE_CACHE_DIR")
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "jittape")
    return path or None
