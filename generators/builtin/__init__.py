"""Source parts of the built-in generators, read as text by generators/library.py (never imported).

_prelude.py and _outputs.py hold the shared standard-library helpers; <capability>.py holds one
workflow skeleton per capability in generators/catalog.py. Each file's renderable part starts
below its marker line; what is above (docstring, lint-only imports) stays here.
"""
