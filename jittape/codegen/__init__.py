"""Code generation: a scheduled graph becomes the Python source of one Numba function."""
