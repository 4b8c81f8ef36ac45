//! The Hugging Face hub, shared by model and dataset downloads: the client
//! and credentials (`client`), errors that name their fix (`errors`), and
//! commit-pinned, verified snapshots with a completeness record
//! (`snapshot`, `verify`, `record`). `model::hub` and `data::hub` decide
//! *which* files they need; this module fetches and checks them.

pub mod client;
pub mod errors;
pub mod record;
pub mod snapshot;
pub mod verify;
