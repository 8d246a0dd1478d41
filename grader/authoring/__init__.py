"""Making the course: regions, stubs, the notebooks' runtime, source and release, README tables."""
