//! The hub client as the Python ecosystem configures it: `HF_HOME`,
//! `HF_ENDPOINT`, `HF_TOKEN` then the login token file, `HF_HUB_OFFLINE`.

use anyhow::{Context, Result};
use hf_hub::Cache;
use hf_hub::api::sync::{Api, ApiBuilder};

/// The hub client: `HF_HOME` and `HF_ENDPOINT` (a trailing `/` dropped, so
/// URLs never read `//api/…`), and credentials as the ecosystem finds them:
/// `HF_TOKEN`, else the token `huggingface-cli login` stored in
/// `$HF_HOME/token`; no token is sent when neither exists.
pub fn hub_client() -> Result<Api> {
    let mut builder = ApiBuilder::from_env();
    if let Some(endpoint) = hub_endpoint() {
        builder = builder.with_endpoint(endpoint);
    }
    builder = builder.with_token(hub_token());
    builder
        .build()
        .context("starting the Hugging Face hub client")
}

/// `HF_ENDPOINT` without trailing slashes (`None`: the public hub).
pub fn hub_endpoint() -> Option<String> {
    std::env::var("HF_ENDPOINT")
        .ok()
        .map(|e| e.trim().trim_end_matches('/').to_string())
        .filter(|e| !e.is_empty())
}

/// `HF_TOKEN` if set and non-empty, else the login token file under
/// `HF_HOME` (default `~/.cache/huggingface/token`).
pub fn hub_token() -> Option<String> {
    std::env::var("HF_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .or_else(|| Cache::from_env().token())
}

/// `HF_HUB_OFFLINE` as Python's `huggingface_hub` reads it.
pub fn offline() -> bool {
    std::env::var("HF_HUB_OFFLINE")
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}
