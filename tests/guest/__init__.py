"""Guest (QEMU) tests of the real Linux backend; see harness.py and conftest.py.

A package so that this directory's conftest.py does not shadow tests/conftest.py (both
would be the top-level module `conftest` otherwise; tests import HotCold from it).
"""
