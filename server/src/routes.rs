//! The one list of routes, each with its OpenAPI description, from which both the router
//! (`server::router`) and the document (`GET /openapi.json`) are made: a route cannot be served
//! without being described, nor described without being served.

use std::sync::LazyLock;

use axum::response::Response;
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify, OpenApi as _};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::{Closed, Fixed};
use super::responses::Unauthorized;
use super::state::AppState;
use super::{audit, browse, clean, contract, events, overview, page, upkeep_routes};

/// Every route with its OpenAPI description: the one list both the router and the document
/// ([`openapi`]) are made from.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(Fixed::openapi())
        .routes(routes!(audit::health))
        .routes(routes!(document))
        .routes(routes!(audit::workspaces))
        .routes(routes!(contract::preview))
        .routes(routes!(contract::prune))
        .routes(routes!(contract::history))
        .routes(routes!(contract::prune_batch))
        .routes(routes!(contract::restore))
        .routes(routes!(clean::clean_plan))
        .routes(routes!(audit::receipts))
        .routes(routes!(audit::receipt))
        .routes(routes!(audit::audit))
        .routes(routes!(events::events))
        .routes(routes!(browse::sessions))
        .routes(routes!(browse::window))
        .routes(routes!(browse::outline))
        .routes(routes!(browse::outline_preview))
        .routes(routes!(browse::assets))
        .routes(routes!(browse::asset_read))
        .routes(routes!(overview::stats))
        .routes(routes!(upkeep_routes::upkeep, upkeep_routes::change_upkeep))
}

/// The routes served without the password: the page and its assets, which hold no data
/// (`page`).
pub(super) fn public_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(page::index))
        .routes(routes!(page::file))
}

/// The document, built once.
static DOCUMENT: LazyLock<Document> = LazyLock::new(|| {
    let mut document = routes().merge(public_routes()).into_openapi();
    Closed.modify(&mut document);
    document
});

/// The OpenAPI document of every route the router serves.
pub fn openapi() -> Document {
    DOCUMENT.clone()
}

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    summary = "This document (OpenAPI 3.1)",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document", body = Object),
        (status = 401, response = Unauthorized),
    )
)]
pub async fn document() -> Response {
    super::document::json(&*DOCUMENT)
}
