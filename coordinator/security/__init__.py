"""Security that is not about sockets: SCRAM credentials, TLS contexts, principals, ACLs.

The network layer (`coordinator.net`) asks these modules; none of them imports it.
"""
