"""Server settings, from the environment (prefix ``AILOWER_SERVER_``) and an optional ``.env`` file.

The data directory and database URL are ailower's own settings (``AILOWER_DATA_DIR``,
``AILOWER_DB_URL``; :mod:`common.settings`, the shared room below the CLI); this module holds only what the REST service adds.
Provider credentials for jobs are read here and nowhere else: clients never send them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.settings import Settings

__all__ = ["ServerSettings", "get_server_settings"]


class ServerSettings(BaseSettings):
    """The REST service's settings (environment variables ``AILOWER_SERVER_<FIELD>``).

    Attributes:
        host, port: where uvicorn listens (default loopback ``127.0.0.1:8000``).
        cpu_workers: job slots on a GPU-less host (static path: compile, assemble, verify).
        gpu_workers: job slots on a GPU host; None = one per visible GPU (each slot's jobs see
            only their GPU through ``CUDA_VISIBLE_DEVICES``).
        lease_s: a claimed job's lease (seconds); a job whose lease lapses is re-queued.
        heartbeat_s: how often a slot renews its lease and polls for cancellation (seconds).
        max_attempts: a job re-queued this many times (its worker died each time) fails.
        max_body_bytes: hard cap on any request body (bytes), before authentication.
        default_max_body_bytes / default_max_ptx_bytes / default_max_source_bytes: per-key limits
            given to new keys (a key may carry its own).
        default_rate_per_minute: submissions per key per rolling minute.
        default_max_concurrent: queued + running jobs per key.
        max_iterations: the largest iteration budget a client may ask for.
        max_wall_time_s: the largest wall-time budget a client may ask for (seconds).
        sandbox_cpu_s / sandbox_memory_mb / sandbox_wall_s: limits of the subprocess that compiles
            untrusted Triton source (``RLIMIT_CPU`` seconds, ``RLIMIT_AS`` MiB, wall seconds).
        sandbox_output_bytes: stdout + stderr bytes the sandboxed compile may write before it is
            killed (``tl.static_print`` floods).
        sandbox_uid / sandbox_gid: the first of the unprivileged identities boxes run as: job
            slot ``i`` uses ``sandbox_uid + i`` / ``sandbox_gid + i`` (never 0; default 100000,
            an otherwise unused range), so no two concurrent jobs share a uid.
        sandbox_cpus / sandbox_pids: a box's CPU quota (cores) and process + thread limit
            (cgroups, :mod:`server.cgroups`).
        sandbox_require: comma-separated cgroup controllers (``memory``, ``pids``, ``cpu``) a box
            must get; on a host that cannot enforce one, source submissions are refused (503
            ``isolation-unavailable`` naming the missing limit). Empty: rlimits only.
        allow_inline_asm: accept ``tl.inline_asm_elementwise`` in submitted source (off: arbitrary
            PTX inside the reference would defeat the reference's role).
        verify_wall_s / verify_max_lines / verify_concurrency / verify_memory_mb: bounds of
            ``POST /v1/verify`` (wall seconds, PTX lines, runs at once per process, child
            ``RLIMIT_AS`` MiB).
        verify_per_key: verifications one key may run at once (so one key cannot hold the
            whole ``verify_concurrency`` pool).
        max_stream_s: an SSE stream closes after this long (the client resumes with
            ``Last-Event-ID``).
        max_streams_per_key: SSE streams one key may hold open at once in this process (429
            ``too-many-streams``): each open stream polls the database, so unbounded streams
            from one key slow every tenant.
        spec_max_configs / spec_max_constraints / spec_max_constraint_evals /
            spec_max_expr_chars / spec_max_expressions / spec_max_params / spec_max_sizes /
            spec_max_dims / spec_max_eval_work / spec_max_verify_bytes / spec_max_bench_bytes /
            spec_max_grid_programs / spec_max_emulated_threads: bounds on the work a submitted
            spec asks for, checked before that work (:class:`server.spec_limits.SpecLimits`
            says what each counts; defaults there).
        max_json_depth: deepest nesting of arrays and objects in a JSON request body (422
            ``json-too-deep``, checked on the raw bytes before the body is parsed).
        anthropic_api_key / openai_api_key / openai_base_url: provider credentials for jobs; a
            provider without credentials is refused at submission.
        header_timeout_s: a connection whose request headers are not complete this long after it
            opened (or after its previous response) is closed (slowloris; ``server.netguard``).
        body_timeout_s: a request body not complete this long after its headers is dropped.
        send_timeout_s: a connection whose response has not drained for this long (the client
            stopped reading) is aborted (``server.netguard``; nginx ``send_timeout``).
        keep_alive_s: an idle keep-alive connection is closed after this long (uvicorn
            ``timeout_keep_alive``).
        max_connections: open connections at most (None: the soft ``RLIMIT_NOFILE`` minus 256);
            beyond it, the connection idle longest is closed.
        auth_free_failures / auth_window_s / auth_base_backoff_s / auth_max_backoff_s: failed
            authentications per client address and per key id allowed in a window before an
            exponential backoff (429 ``auth-backoff``; :class:`server.keys.AuthLimiter`).
        max_queued_per_key: queued jobs one key may have, whatever its ``max_concurrent`` (429
            ``too-many-jobs``); slots pick jobs round-robin by key (``server.jobs.claim_next``).
        leaderboard_rate_per_s / leaderboard_burst: the public leaderboard routes' token bucket
            per client address (requests per second, bucket size).
        backlog: the kernel's listen queue length (``listen(2)``; capped by
            ``net.core.somaxconn``).
        max_header_bytes: the largest request head (line + headers) h11 buffers (bytes).
        price_per_mtok: USD per million tokens by model, ``{"model": [input, output]}``; needed to
            enforce a job's ``max_cost_usd``.
    """

    model_config = SettingsConfigDict(env_prefix="AILOWER_SERVER_", env_file=".env", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    cpu_workers: int = Field(default=2, ge=0, le=256)
    gpu_workers: int | None = Field(default=None, ge=0, le=64)
    lease_s: float = Field(default=30.0, gt=0)
    heartbeat_s: float = Field(default=2.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    max_body_bytes: int = Field(default=2_000_000, ge=1024)
    default_max_body_bytes: int = Field(default=1_000_000, ge=1024)
    default_max_ptx_bytes: int = Field(default=1_000_000, ge=1024)
    default_max_source_bytes: int = Field(default=64_000, ge=256)
    default_rate_per_minute: int = Field(default=30, ge=1)
    default_max_concurrent: int = Field(default=4, ge=1)
    max_iterations: int = Field(default=32, ge=1, le=1000)
    max_wall_time_s: float = Field(default=3600.0, gt=0)
    sandbox_cpu_s: int = Field(default=300, ge=1)
    sandbox_memory_mb: int = Field(default=8192, ge=256)
    sandbox_wall_s: float = Field(default=600.0, gt=0)
    sandbox_output_bytes: int = Field(default=16 << 20, ge=4096)
    sandbox_uid: int = Field(default=100_000, ge=1)
    sandbox_gid: int = Field(default=100_000, ge=1)
    sandbox_cpus: float = Field(default=1.0, gt=0)
    sandbox_pids: int = Field(default=512, ge=16)
    sandbox_require: str = "memory,pids,cpu"
    max_stream_s: float = Field(default=600.0, gt=0)
    max_streams_per_key: int = Field(default=8, ge=1)
    allow_inline_asm: bool = False
    verify_wall_s: float = Field(default=30.0, gt=0)
    verify_max_lines: int = Field(default=200_000, ge=10)
    verify_concurrency: int = Field(default=4, ge=1)
    verify_per_key: int = Field(default=1, ge=1)
    verify_memory_mb: int = Field(default=4096, ge=256)
    spec_max_configs: int = Field(default=64, ge=1, le=4096)
    spec_max_constraints: int = Field(default=16, ge=0)
    spec_max_constraint_evals: int = Field(default=512, ge=0)
    spec_max_expr_chars: int = Field(default=256, ge=16, le=512)
    spec_max_expressions: int = Field(default=512, ge=8)
    spec_max_params: int = Field(default=64, ge=1)
    spec_max_sizes: int = Field(default=8, ge=2)
    spec_max_dims: int = Field(default=16, ge=1)
    spec_max_eval_work: int = Field(default=4_000, ge=100)
    spec_max_verify_bytes: int = Field(default=64 << 20, ge=1024)
    spec_max_bench_bytes: int = Field(default=4 << 30, ge=1024)
    spec_max_grid_programs: int = Field(default=1 << 22, ge=1)
    spec_max_emulated_threads: int = Field(default=1 << 20, ge=32)
    max_json_depth: int = Field(default=32, ge=4, le=256)
    anthropic_api_key: SecretStr | None = None
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    price_per_mtok: dict[str, tuple[float, float]] = Field(default_factory=dict)
    # connections (server.netguard)
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_timeout_s: float = Field(default=30.0, gt=0)
    send_timeout_s: float = Field(default=30.0, gt=0)
    keep_alive_s: float = Field(default=5.0, gt=0)
    max_connections: int | None = Field(default=None, ge=16)
    max_header_bytes: int = Field(default=16384, ge=1024)
    backlog: int = Field(default=4096, ge=16, le=65535)
    max_queued_per_key: int = Field(default=16, ge=1)
    leaderboard_rate_per_s: float = Field(default=2.0, gt=0)
    leaderboard_burst: int = Field(default=10, ge=1)
    auth_free_failures: int = Field(default=5, ge=1)
    auth_window_s: float = Field(default=300.0, gt=0)
    auth_base_backoff_s: float = Field(default=1.0, gt=0)
    auth_max_backoff_s: float = Field(default=60.0, gt=0)

    def required_cgroups(self) -> tuple[str, ...]:
        """``sandbox_require`` as a tuple of controller names.

        Raises:
            ValueError: a name other than ``memory``, ``pids``, ``cpu``.
        """
        names = tuple(n.strip() for n in self.sandbox_require.split(",") if n.strip())
        bad = [n for n in names if n not in ("memory", "pids", "cpu")]
        if bad:
            raise ValueError(f"AILOWER_SERVER_SANDBOX_REQUIRE: unknown cgroup controller(s) "
                             f"{bad}; known: memory, pids, cpu")
        return names

    def sandbox_limits(self, slot: int = 0):
        """The :class:`server.sandbox.SandboxLimits` of job slot ``slot`` (its own uid/gid)."""
        from server.sandbox import SandboxLimits

        return SandboxLimits(cpu_s=self.sandbox_cpu_s, memory_mb=self.sandbox_memory_mb,
                             wall_s=self.sandbox_wall_s, output_bytes=self.sandbox_output_bytes,
                             cpus=self.sandbox_cpus, pids=self.sandbox_pids,
                             require=self.required_cgroups(),
                             uid=self.sandbox_uid + slot, gid=self.sandbox_gid + slot)

    def spec_limits(self):
        """The :class:`server.spec_limits.SpecLimits` these settings give."""
        from server.spec_limits import SpecLimits

        return SpecLimits(**{f: getattr(self, f"spec_{f}")
                             for f in SpecLimits.__dataclass_fields__})

    def secrets(self) -> list[str]:
        """Every credential value, for redaction of events, logs and artifacts."""
        return [s.get_secret_value() for s in (self.anthropic_api_key, self.openai_api_key) if s]


def get_server_settings() -> tuple[Settings, ServerSettings]:
    """ailower's settings and the server's, read from the environment now."""
    return Settings(), ServerSettings()


def server_dir(settings: Settings) -> Path:
    """The server's folder under the data directory (job folders, sandbox caches)."""
    return settings.data_dir / "server"
