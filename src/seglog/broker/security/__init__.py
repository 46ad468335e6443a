"""Security: TLS listeners, SASL authentication, principals and ACL authorization.

- :mod:`.session`: what the broker knows of one connection (its listener, its
  principal, where its authentication stands) and listener-scoped settings.
- :mod:`.tls`: the ``ssl.SSLContext`` of a listener from Kafka's PEM settings,
  and the principal of a client certificate.
- :mod:`.scram` and :mod:`.sasl`: the SASL mechanisms and the per-connection
  authentication state machine.
- :mod:`.credentials`: PLAIN users and SCRAM credentials.
"""
