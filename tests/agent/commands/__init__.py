"""Tests for the agent/commands package."""
