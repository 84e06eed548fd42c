"""Deterministic failover simulation driving the production state machines."""
