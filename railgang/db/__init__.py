"""Typed SQLAlchemy 2.0 models, engine/session handling and Alembic migrations."""
