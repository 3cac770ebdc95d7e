"""Shared by the testinfra tests of all Molecule scenarios: fixtures and helpers live in shared/rdma_testinfra.py."""

pytest_plugins = ("rdma_testinfra",)
