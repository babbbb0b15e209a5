"""Tests of the conversation layer: neutral messages, the command parser and conversation memory."""
