"""Checking one submission: the spec vocabulary, checks, generated properties, the watch, timing, the judge, scoring."""
