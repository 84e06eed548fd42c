"""Operating kafkron: Prometheus metrics, their HTTP exposition, and the logging setup.

`metrics` names every metric; `collectors` read the actors' own figures at scrape
time; `lag` samples consumer-group lag; `exposition` serves ``/metrics`` on the
actor's event loop; `logs` is the one logging setup of every command.
"""
