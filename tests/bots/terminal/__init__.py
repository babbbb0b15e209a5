"""Tests for the bots/terminal package."""
