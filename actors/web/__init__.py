"""The web console (`kafkron web`): schedules, runs, dead letters, DAG runs, actions.

`app` has the routes and who may act, `data` reads the changelog and the history
database, `drawing` lays out the DAG graph and the run charts, and `templates/`
holds the server-rendered HTML (Jinja2, autoescaped; no JavaScript).
"""
