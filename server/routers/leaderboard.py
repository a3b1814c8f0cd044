"""``GET /leaderboard`` (the self-contained HTML page) and ``GET /v1/leaderboard`` (JSON).

Both are public, like ``/v1/kernels``: the leaderboard holds campaign results (kernel, arch,
provider/model, times, verifier verdicts), never sources, PTX or API keys, and a browser must be
able to open the page without a bearer token. Built from the campaign cells in the service's
database (:mod:`campaign.leaderboard`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from server.errors import ApiError, error_responses

leaderboard_router = APIRouter(tags=["leaderboard"])

_ARCH = Query(pattern=r"^sm_(89|90a|100a)$", description="only this arch")


def _board(request: Request, campaign: str | None, arch: str | None) -> Any:
    from campaign.leaderboard import LeaderboardError, build_leaderboard
    from campaign.store import CampaignStore

    store = getattr(request.app.state, "campaign_store", None)
    if store is None:
        store = CampaignStore(request.app.state.settings.database_url)
        request.app.state.campaign_store = store
    try:
        return build_leaderboard(store, campaign=campaign, archs=[arch] if arch else None)
    except LeaderboardError as exc:
        raise ApiError(404, "not-found", str(exc), loc=["query", "campaign"]) from None


@leaderboard_router.get("/v1/leaderboard", responses=error_responses(404, 422),
                        summary="The leaderboard (JSON)")
def leaderboard_json(request: Request,
                     campaign: Annotated[str | None, Query(max_length=200)] = None,
                     arch: Annotated[str | None, _ARCH] = None) -> dict[str, Any]:
    """Per kernel x arch: autotuned Triton vs the best verified candidate, the summary rows
    (geometric-mean speedup, win/tie/loss per provider/model and arch) and every cell."""
    return _board(request, campaign, arch).model_dump(mode="json")


@leaderboard_router.get("/leaderboard", response_class=HTMLResponse,
                        responses=error_responses(404, 422), summary="The leaderboard page")
def leaderboard_html(request: Request,
                     campaign: Annotated[str | None, Query(max_length=200)] = None,
                     arch: Annotated[str | None, _ARCH] = None) -> HTMLResponse:
    """One self-contained HTML page (tables sortable by a click, plotly plots inlined)."""
    from campaign.html import render_html

    return HTMLResponse(render_html(_board(request, campaign, arch)))
