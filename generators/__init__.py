"""Generators and what judges one: the generator contract, candidate rows, the sandboxed runner,
forge and verify."""
