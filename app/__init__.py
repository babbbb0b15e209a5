"""Composition root: settings (the only reader of the environment), logging, the `lookout` CLI, the HTTP server."""
