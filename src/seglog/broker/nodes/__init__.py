"""One broker node per core: several broker processes on one machine and one log directory.

``seglog serve --nodes N`` starts a :mod:`~seglog.broker.nodes.supervisor`
process that runs N broker processes (nodes). Each is a Kafka node with its own
id and listener ports (:mod:`.cluster`), leads the partitions assigned to it
(:mod:`.assignment`) and opens only those. The node with the lowest id is the
controller: it alone writes topic metadata, and tells the others over a local
channel (:mod:`.channel`); the others forward topic administration to it
(:mod:`.topic_admin`).
"""
