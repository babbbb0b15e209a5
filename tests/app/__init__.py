"""Tests of the composition root: settings, logging, CLI, HTTP server."""
