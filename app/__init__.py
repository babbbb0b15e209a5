"""Composition root: settings (the only reader of the environment), logging, wiring, the `lookout` CLI and the HTTP server."""
