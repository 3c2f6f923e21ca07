"""Source parts of the built-in generators, read as text by synthesis/library.py.

library.py imports each part (they only define functions) so stage cache keys follow them; their
code runs only inside rendered generators.

_prelude.py and _outputs.py hold the shared standard-library helpers; <capability>.py holds one
workflow skeleton per capability in synthesis/catalog.py. Each file's renderable part starts
below its marker line; what is above (docstring, lint-only imports) stays here.
"""
