"""Tests for the bots/telegram package."""
