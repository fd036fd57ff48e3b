"""Boundary's fact store: public projection facts in ClickHouse (chdb embedded, or a server).

``ddl`` generates tables from the catalog, ``batch_check`` validates projection batches,
``guard`` rewrites resident SQL, ``store`` runs all of it over clickhouse-connect.
"""
