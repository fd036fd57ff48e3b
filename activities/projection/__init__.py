"""Projection core: decoded profiler evidence -> relation rows and batches (pure, no I/O).

Steps, each a pure function over typed inputs (see docs/projection.md):

* :func:`walk.plan_meta_walk` / :func:`walk.find_root_context`: the bounded meta walk-back;
* :func:`assemble.assemble_execution` / :func:`assemble.abandoned_execution`: rows per relation;
* :func:`batches.build_batches` / :func:`batches.private_tables`: Arrow IPC batches for
  Boundary and pyarrow tables for Lance, with :func:`batches.assert_public_only` as the guard.
"""
