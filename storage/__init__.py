"""Persistence for lifebot: SQLModel tables, the database engine and narrow repositories."""
