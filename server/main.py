"""The FastAPI application: routers, error handlers, body limit, the job slots' lifespan."""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from common.settings import Settings
from server.db import make_engine, make_sessionmaker
from server.errors import install_handlers
from server.keys import AuthLimiter, dummy_key_hash
from server.metrics import DBCollector
from server.routers.leaderboard import leaderboard_router
from server.routers.lowerings import router as lowerings_router
from server.routers.misc import kernels_router, ops_router, verify_router
from server.settings import ServerSettings

__all__ = ["create_app"]

log = logging.getLogger("ailower.server")


def _private_data_dir(data_dir) -> None:
    """Create the data directory with mode 0700 (and tighten an existing one): job folders,
    artifacts and the SQLite database are the tenants' data."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(data_dir, 0o700)


def create_app(settings: Settings | None = None, server_settings: ServerSettings | None = None,
               *, workers: bool = True) -> FastAPI:
    """Build the app.

    Args:
        settings, server_settings: read from the environment when None.
        workers: start a :class:`server.workers.WorkerPool` with the app (False: an API-only
            process; jobs wait for ``python -m server.workers`` elsewhere).
    """
    settings = settings or Settings()
    ss = server_settings or ServerSettings()
    _private_data_dir(settings.data_dir)
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = None
        if workers:
            from server.workers import WorkerPool

            pool = WorkerPool(settings, ss)
            pool.start()
        app.state.pool = pool
        log.info("ailower serve: %d job slot(s), GPUs %s", pool.n if pool else 0,
                 pool.gpus if pool else [])
        try:
            yield
        finally:
            if pool is not None:
                pool.shutdown()
            engine.dispose()

    app = FastAPI(title="ailower", version="1", lifespan=lifespan,
                  max_body_size=ss.max_body_bytes, docs_url=None,  # /docs: offline_docs below
                  description="Lower Triton kernels to verified, measured PTX over HTTP. "
                              "Every /v1 route except /v1/kernels needs "
                              "'Authorization: Bearer <API key>'.")
    # no trailing-slash redirects: Starlette builds their Location from the client's Host header
    app.router.redirect_slashes = False
    app.state.settings, app.state.server_settings = settings, ss
    app.state.engine, app.state.sessionmaker = engine, make_sessionmaker(engine)
    app.state.pool = None
    app.state.verify_slots = asyncio.Semaphore(ss.verify_concurrency)
    app.state.auth_limiter = AuthLimiter(ss.auth_free_failures, ss.auth_window_s,
                                         ss.auth_base_backoff_s, ss.auth_max_backoff_s)
    dummy_key_hash()  # made now, so that the first unknown key id costs no extra hash
    registry = CollectorRegistry(auto_describe=True)
    registry.register(DBCollector(app.state.sessionmaker))
    app.state.metrics_registry = registry
    install_handlers(app)
    app.include_router(lowerings_router)
    app.include_router(kernels_router)
    app.include_router(verify_router)
    app.include_router(ops_router)
    app.include_router(leaderboard_router)
    offline_docs(app)
    return app


SWAGGER_ASSETS = "/docs-assets"
"""Where ``/docs`` loads Swagger UI's script and style from (this server, never a CDN)."""


def offline_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (Swagger UI) from the ``swagger-ui-bundle-v2`` wheel's own files.

    FastAPI's default page loads Swagger UI from a CDN, so offline (the usual case beside GPUs
    with no internet) it was blank. The bundle's ``swagger-ui-bundle.js`` and ``swagger-ui.css``
    are served at :data:`SWAGGER_ASSETS`; the page reads ``/openapi.json`` as before.
    """
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from starlette.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount(SWAGGER_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json",
                                   title="ailower - Swagger UI",
                                   swagger_js_url=f"{SWAGGER_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{SWAGGER_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{SWAGGER_ASSETS}/favicon-32x32.png")
