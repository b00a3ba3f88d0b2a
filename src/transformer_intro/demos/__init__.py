"""Command-line demonstrations that put a model, a task and training together.

They sit above every other layer of the package, which imports nothing from them:

* :mod:`.multi_process`: one process of a multi-process data-parallel run on CPU devices
  (``scripts/two_processes.py`` starts two and shows what each sees; chapter 12 runs it).
"""
