"""What people see of the topics: readers and view models shared by the front ends.

The command line (`actors.cli`) and the web console (`actors.web`) show the same
things, so what both need lives here, below both: `tail` reads a topic to its end
without joining a group, `schedules` turns the changelog into schedules as a shard
would restore them, `dag_view` a DAG run's tasks and their states, and `spec_arg`
reads the SPEC a person types into "when will it run?".
"""
