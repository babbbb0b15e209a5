"""Lookout tests: they mirror the packages; fakes and recorded payloads live here; nothing touches the network."""
