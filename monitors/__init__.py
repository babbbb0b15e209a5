"""Standing monitors: schedule grammar, scheduler, runs, subscriptions and the delivery outbox."""
