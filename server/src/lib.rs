//! `pruning-server`: the HTTP API (axum), the engine as a local server for UIs and TUIs. It
//! works through the engine and the OpenCode store's API (`pruning_opencode`), never
//! through SQL.
//!
//! Routes (docs/ARCHITECTURE.md, "HTTP"): `POST
//! /api/workspaces/{id}/session-pruning/{preview,prune,
//! history,prune-batch,restore,clean-plan}` with exactly the CodeNomad-compatible shapes; `GET .../receipts`,
//! `GET .../receipts/{receiptID}` and `GET .../audit` (`audit`); `GET .../events` (Server-Sent
//! Events, resumable); `GET /api/workspaces/{id}/stats` (the overview: `overview`);
//! the browsing routes `GET /api/workspaces/{id}/sessions` and `POST
//! /api/workspaces/{id}/session-history/{window,outline,outlinePreview,assets,assetRead}` (read-only, on
//! connections of their own: `browse`);
//! `GET` and `POST /api/session-pruning/upkeep` (the clean on a schedule, `serve --auto-clean`:
//! `upkeep`); `GET /api/workspaces`; `GET /openapi.json` (the OpenAPI 3.1 document, derived from the
//! handlers and the types they answer with: `openapi`); `GET /health`; the page at `GET /` and
//! `GET /page/{name}` (`page`, built into the binary).
//!
//! This crate owns HTTP concerns only: routes, JSON answers and their status codes,
//! authentication, the body limit, workspace scoping, CORS (`cors`), writes no page of another
//! origin can forge (`forgery`), the event stream, the log
//! lines of refused and failed requests, and the bounds on connections (`connections`). The engine does the work, on tokio's blocking pool.

#![warn(missing_docs)]

mod audit;
pub mod auth;
mod body;
mod browse;
mod clean;
pub mod connections;
mod contract;
mod cors;
pub mod document;
pub mod error;
mod events;
mod forgery;
mod host;
mod openapi;
mod overview;
mod page;
mod query;
mod responses;
mod routes;
mod server;
mod state;
mod upkeep;
mod upkeep_clean;
mod upkeep_routes;
pub mod workspaces;

pub use auth::Password;
pub use connections::ConnectionLimits;
pub use cors::Origin;
pub use error::ApiError;
pub use events::{HEARTBEAT, RESYNC};
pub use routes::openapi;
pub use server::{router, serve, serve_with, SHUTDOWN_GRACE};
pub use state::{Admission, AppState, OwnerStamp, ServerOptions};
pub use upkeep::{
    RunStatus, UpkeepChange, UpkeepCounts, UpkeepOptions, UpkeepRun, UpkeepStatus,
    UPKEEP_EVENT_TYPE,
};
pub use workspaces::{Workspace, Workspaces};
