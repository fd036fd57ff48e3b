"""The data plane's adapters, one lower home for everything that talks to its stores.

The Lance store (``lance_store``), Boundary's workload client (``boundary_client``) and the AWS
clients (``aws``), used alike by the activities, the query coordinator, the gateway and the
operator tools. Boundary, the control plane, imports nothing from here (the import contracts in
``pyproject.toml``, checked by tests/test_layers.py).
"""
