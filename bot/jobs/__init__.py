"""Speaking first: scheduler, morning briefings, reminders, proposed events, the outbox."""
