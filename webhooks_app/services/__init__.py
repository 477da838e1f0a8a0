"""Every write of the webhooks: `webhooks` (subscriptions and their audit log), `deliveries` (events to
deliveries, attempts, retries, redelivery), with `signing` (the signature) and `transport` (the POST)."""
