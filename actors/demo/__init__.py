"""`kafkron demo`: the whole system on a local broker, watched live.

`run` orchestrates (broker, topics, child processes, the billing example's
schedules, the live view, a clean stop, the summary); `children` supervises the
child processes; `catalog` holds the commands the demo submits; `feed` folds the
outcome topics into what the view shows; `view` draws it; `jobs` adds two jobs
the billing example does not need but a demo does (a one-off reminder, and a flaky
job that works on its second attempt).
"""
