"""Chaos and fault-injection testing for ordered job processing on Redis Streams + PostgreSQL."""

__version__ = "0.1.0"
