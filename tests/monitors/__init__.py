"""Tests for the monitors package: schedule grammar, scheduler, runs and delivery."""
