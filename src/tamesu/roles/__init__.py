"""The parts a model (or a script) plays: the simulated user, and later the judge and the extractor."""
