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

    Connections go through :func:`server.netguard.guarded_h11`: request headers within
    ``header_timeout_s``, bodies within ``body_timeout_s``, a stalled response aborted after
    ``send_timeout_s``, at most ``max_connections`` open
    (capped by ``RLIMIT_NOFILE``, whose soft limit is first raised to the hard one).
    """
    import uvicorn

    from server.netguard import (
        ACCEPT_BURST,
        GuardedServer,
        connection_cap,
        guarded_h11,
        raise_nofile_limit,
    )

    ss = ServerSettings()
    raise_nofile_limit()
    cap = connection_cap(ss.max_connections, ACCEPT_BURST)
    app = create_app(server_settings=ss, workers=workers)
    config = uvicorn.Config(app, host=host or ss.host, port=port if port is not None else ss.port,
                            log_level=log_level, proxy_headers=False, server_header=False,
                            http=guarded_h11(ss.header_timeout_s, ss.body_timeout_s, cap,
                                             ss.send_timeout_s),
                            backlog=ACCEPT_BURST, timeout_keep_alive=max(1, round(ss.keep_alive_s)),
                            h11_max_incomplete_event_size=ss.max_header_bytes)
    GuardedServer(config, ss.backlog).run()
