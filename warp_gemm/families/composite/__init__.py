"""Plans of several steps over other families: peeled edges, K slices with a finishing pass."""
