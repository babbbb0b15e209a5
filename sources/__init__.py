"""Public sources, one module each, behind one polite HTTP client; the `Item` every source returns."""
