"""The REST service: lowering requests over HTTP with durable jobs, SSE progress and API keys.

Public API: :func:`create_app`, :func:`serve`, :class:`ServerSettings`, :class:`WorkerPool`,
:func:`check_triton_source`, :class:`SourceRejected`. See ``docs/rest.md``.
"""

from server.main import create_app
from server.settings import ServerSettings
from server.source_check import SourceRejected, check_triton_source
from server.workers import WorkerPool

__all__ = ["create_app", "serve", "ServerSettings", "WorkerPool", "check_triton_source",
           "SourceRejected"]


def serve(host: str | None = None, port: int | None = None, *, workers: bool = True,
          log_level: str = "info") -> None:
    """Run the service with uvicorn in the foreground (``ailower serve``).

    Args:
        host, port: override ``AILOWER_SERVER_HOST`` / ``AILOWER_SERVER_PORT``.
        workers: run the job slots in this process.
        log_level: uvicorn's log level.
    """
    import uvicorn

    ss = ServerSettings()
    app = create_app(server_settings=ss, workers=workers)
    uvicorn.run(app, host=host or ss.host, port=port if port is not None else ss.port,
                log_level=log_level, proxy_headers=False, server_header=False)
