"""Diagnosis: failure summaries of held-out episodes, clusters by root cause, the report and the
guidance the next synthesize reads."""
