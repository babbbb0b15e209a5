"""Tests for the bots/slack package."""
