"""Settings, from the environment (prefix ``AILOWER_``) and an optional ``.env`` file.

Provider credentials are *not* ailower settings: the official SDKs read their usual variables
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """ailower's settings.

    Attributes:
        data_dir: ``AILOWER_DATA_DIR``; caches, sources and the default database (``~/.ailower``).
        db_url: ``AILOWER_DB_URL``; SQLAlchemy URL (default: SQLite ``<data_dir>/ailower.db``).
        ptxas: ``AILOWER_PTXAS``; ptxas to use instead of Triton's bundled one.
        provider: ``AILOWER_PROVIDER``; default provider (``search``: the offline systematic
            search, the default since it beat autotuned Triton on the H200 (geometric mean
            1.169x over the compute-bound and paper kernels, campaign of 2026-12-01); ``triton``
            re-emits the autotune configs' own PTX and needs no search time).
        model: ``AILOWER_MODEL``; model name for the anthropic/openai providers.
        iterations: ``AILOWER_ITERATIONS``; default iteration budget.
        hang_timeout_s: ``AILOWER_HANG_TIMEOUT_S``; a launch running longer is a hang (seconds).
        job_timeout_s: ``AILOWER_JOB_TIMEOUT_S``; wall limit of one GPU worker job (seconds).
        max_ptx_version: ``AILOWER_MAX_PTX_VERSION``; PTX ISA cap for Triton's output (90 = 9.0,
            the CUDA 13.0 driver's limit).
        max_tokens_total: ``AILOWER_MAX_TOKENS_TOTAL``; stop a model run once it has used this
            many tokens (input + output); None: no cap.
        max_cost_usd: ``AILOWER_MAX_COST_USD``; stop a model run once its tokens cost this much
            (priced with ``price_per_mtok``); None: no cap.
        price_per_mtok: ``AILOWER_PRICE_PER_MTOK``; JSON ``{"model": [usd_in, usd_out]}`` per
            million tokens (a key ending in ``*`` matches model ids by prefix).
        autotune_space: ``AILOWER_AUTOTUNE_SPACE``; the suite entries' autotune space,
            ``wide`` (at least the usual Triton grid per kind, the default: speedups are against
            that baseline) or ``narrow`` (the spaces before issue 22's widening); see
            ``kernels.registry.SPACES``.
        autotune_max_configs: ``AILOWER_AUTOTUNE_MAX_CONFIGS``; with a GPU, autotune at most
            this many configs of the space (the narrow space's first, then every k-th of the
            rest, :func:`harness.suite_baseline.capped_configs`, as ``ailower baseline
            --max-configs`` does); None: every config. The report says when it was capped.
    """

    model_config = SettingsConfigDict(env_prefix="AILOWER_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".ailower")
    db_url: str | None = None
    ptxas: str | None = None
    provider: str = "search"
    model: str | None = None
    iterations: int = Field(default=4, ge=1, le=1000)
    hang_timeout_s: float = Field(default=10.0, gt=0)
    job_timeout_s: float = Field(default=900.0, gt=0)
    max_ptx_version: int = Field(default=90, ge=60, le=200)
    max_tokens_total: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    price_per_mtok: dict[str, tuple[float, float]] = Field(default_factory=dict)
    autotune_space: str = "wide"
    autotune_max_configs: int | None = Field(default=None, ge=1)

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser()

    @property
    def database_url(self) -> str:
        """``db_url`` or the SQLite file in ``data_dir``."""
        return self.db_url or f"sqlite:///{self.data_dir / 'ailower.db'}"

    @property
    def cache_dir(self) -> Path:
        """Reference-compile and source cache."""
        return self.data_dir / "cache"


def get_settings() -> Settings:
    """Read the settings now (environment at call time)."""
    return Settings()
