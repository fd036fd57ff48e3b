"""Export Boundary's OpenAPI document (control + workload API) to docs/openapi-boundary.json.

``python -m api.boundary.openapi_export [path]``. The two apps are served on different
listeners, so each path item names its server (OpenAPI allows ``servers`` per path item).
A test regenerates the document and fails when the committed file differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from api.boundary.app import (
    CONTROL_DESCRIPTION,
    WORKLOAD_DESCRIPTION,
    create_control_app,
    create_workload_app,
)
from formats import boundary_wire as w

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi-boundary.json"
CONTROL_SERVER = {"url": "http://127.0.0.1:8710", "description": "Control API (embedded stack)"}
WORKLOAD_SERVER = {"url": "https://127.0.0.1:8711", "description": "Workload API, mTLS (embedded stack)"}


def build_document() -> dict[str, Any]:
    control = create_control_app(None).openapi()
    workload = create_workload_app(None).openapi()
    paths: dict[str, Any] = {}
    for doc, server in ((control, CONTROL_SERVER), (workload, WORKLOAD_SERVER)):
        for path, item in doc["paths"].items():
            if path in paths:
                raise RuntimeError(f"path {path} is defined by both the control and the workload API")
            for method, op in item.items():
                if not isinstance(op, dict) or path == "/healthz":
                    continue
                if server is CONTROL_SERVER:
                    op["security"] = [{"bearerToken": []}]
                elif path == "/workload-tokens":
                    op["security"] = [{"mutualTls": []}]
                else:
                    op["security"] = [{"mutualTls": [], "workloadJwt": []}]
                del method
            paths[path] = {"servers": [server], **item}
    schemas: dict[str, Any] = {}
    for doc in (control, workload):
        for name, schema in doc.get("components", {}).get("schemas", {}).items():
            if name in schemas and schemas[name] != schema:
                raise RuntimeError(f"schema {name} differs between the two apps")
            schemas[name] = schema
    return {
        "openapi": control["openapi"],
        "info": {
            "title": "BAML Boundary API",
            "version": w.API_VERSION,
            "description": CONTROL_DESCRIPTION + "\n\n" + WORKLOAD_DESCRIPTION,
        },
        "servers": [CONTROL_SERVER, WORKLOAD_SERVER],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                "bearerToken": {"type": "http", "scheme": "bearer", "description": "bst_usr_ or bst_op_"},
                "workloadJwt": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "From POST /workload-tokens; needs the same client certificate (mTLS).",
                },
                "mutualTls": {"type": "mutualTLS", "description": "Client certificate from the Boundary CA."},
            },
        },
    }


def render() -> str:
    return json.dumps(build_document(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
