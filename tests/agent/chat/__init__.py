"""Tests for the agent/chat package."""
