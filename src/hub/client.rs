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

/// The hub's base URL: `HF_ENDPOINT` as [`hub_endpoint`] reads it, else
/// the public hub.
pub fn hub_url() -> String {
    hub_endpoint().unwrap_or_else(|| "https://huggingface.co".into())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_hf_token_then_the_login_file() {
        // One test touches these variables, so no other test races it.
        let home = std::env::temp_dir().join(format!("specbench-hf-home-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        // SAFETY: this test alone reads or writes these variables.
        unsafe {
            std::env::set_var("HF_HOME", &home);
            std::env::remove_var("HF_TOKEN");
            std::env::set_var("HF_ENDPOINT", "http://127.0.0.1:9/");
        }
        assert_eq!(hub_token(), None, "no token file, no HF_TOKEN: none sent");
        std::fs::write(home.join("token"), "hf_from_login\n").unwrap();
        assert_eq!(hub_token().as_deref(), Some("hf_from_login"));
        unsafe { std::env::set_var("HF_TOKEN", "hf_from_env") };
        assert_eq!(hub_token().as_deref(), Some("hf_from_env"));
        assert_eq!(hub_endpoint().as_deref(), Some("http://127.0.0.1:9"));
        unsafe {
            std::env::remove_var("HF_TOKEN");
            std::env::remove_var("HF_ENDPOINT");
            std::env::remove_var("HF_HOME");
        }
        std::fs::remove_dir_all(&home).unwrap();
    }
}
