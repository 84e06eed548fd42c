"""The wire contract of kafkron: topic names, topic configs, message types, codec."""
