"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""
