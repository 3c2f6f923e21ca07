"""Where candidate tasks come from: the built-in generator library (catalog, vocabularies,
builtin/), LLM-written generators, executable domains (domain/) and SkillSynth (skillgraph/);
synthesize.py mixes them for the synthesize stage."""
