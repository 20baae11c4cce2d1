"""The outbox: every push is sent at most once and proven delivered by a receipt."""
