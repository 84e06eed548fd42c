"""The billing world of the demo: usage, exchange rates, nightly invoices, emails.

``jobs.py`` registers the jobs (``kafkron worker --jobs actors.examples.billing.jobs``);
``provider.py`` is a fake payment provider that honours idempotency keys;
``store.py`` is the billing database (invoices with a unique (customer, period)).
"""
