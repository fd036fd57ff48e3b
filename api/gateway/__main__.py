"""``python -m api.gateway``: serve the gateway with uvicorn on the configured address."""

from __future__ import annotations

import uvicorn

from api.gateway.settings import get_settings


def main() -> None:
    settings = get_settings()
    uvicorn.run("api.gateway.app:app", host=settings.host, port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
