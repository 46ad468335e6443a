"""The broker's HTTP API (the console's), served on the broker's event loop by aiohttp.

Off unless ``console.port`` is set (``seglog serve --console-port N``); it binds
``console.host`` only. Each route is one :class:`~.routes.Route` in
:data:`~.routes.ROUTES`: its handler, its parameters and what ``/openapi.json``
says of it come from that one entry, so a route is added in one place.

- :mod:`.server`: the site (HTTP or HTTPS), its start and graceful stop.
- :mod:`.routes`: the route table, parameter parsing, JSON errors.
- :mod:`.auth`: HTTP Basic against the broker's SASL users, ACL checks.
- :mod:`.topics`: ``/v1/topics`` and lookup by key.
- :mod:`.lookup`: a key's records over a topic's partitions, whichever node leads them.
- :mod:`.openapi`: the OpenAPI 3 document of the table.
"""
