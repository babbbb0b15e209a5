"""Tests of the platform rendering: Telegram HTML and Slack mrkdwn/Block Kit."""
