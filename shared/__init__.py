"""Jetfleet's contract package: wire messages, topics, delegate configs, canonical hashing.

Pure by rule (import-linter enforces it): no network, no disk, no database, no runtime library.
Both the agent and the controller import this package; it imports neither of them.
"""
