"""Developer tools: the model corpus and the sweeps run over it."""
