//! Hub failures in words that name the fix: a 401 is a login problem, a 403
//! a gated repo, a 404 a wrong id or revision, 429/5xx a busy hub, a refused
//! connection no network — never one "(no network?)" for everything.

use hf_hub::api::sync::ApiError;

/// What kind of failure an hf-hub error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HubFailure {
    Unauthorized,
    Forbidden,
    NotFound,
    Busy(u16),
    OtherStatus(u16),
    Unreachable,
    Other,
}

/// Classifies an hf-hub error by the HTTP status or transport failure behind it.
pub fn classify(error: &ApiError) -> HubFailure {
    match error {
        ApiError::TooManyRetries(inner) => classify(inner),
        ApiError::RequestError(inner) => match inner.as_ref() {
            ureq::Error::StatusCode(401) => HubFailure::Unauthorized,
            ureq::Error::StatusCode(403) => HubFailure::Forbidden,
            ureq::Error::StatusCode(404) => HubFailure::NotFound,
            ureq::Error::StatusCode(code @ (429 | 500..=599)) => HubFailure::Busy(*code),
            ureq::Error::StatusCode(code) => HubFailure::OtherStatus(*code),
            ureq::Error::HostNotFound
            | ureq::Error::ConnectionFailed
            | ureq::Error::Timeout(_)
            | ureq::Error::Io(_) => HubFailure::Unreachable,
            _ => HubFailure::Other,
        },
        ApiError::IoError(_) => HubFailure::Unreachable,
        _ => HubFailure::Other,
    }
}

/// One line: what failed (`action`, e.g. "listing facebook/opt-13b at main"),
/// why, and what to do.
pub fn explain(error: &ApiError, action: &str, repo: &str, revision: &str) -> String {
    let token_sent = super::client::hub_token().is_some();
    let endpoint = super::client::hub_url();
    match classify(error) {
        HubFailure::Unauthorized if token_sent => format!(
            "{action}: the hub rejected the token (401 Unauthorized): check HF_TOKEN or the token file of `huggingface-cli login` ($HF_HOME/token), or create a new token"
        ),
        HubFailure::Unauthorized => format!(
            "{action}: the hub asks for a login (401 Unauthorized) and no token is set: run `huggingface-cli login` or set HF_TOKEN (gated or private repos need one)"
        ),
        HubFailure::Forbidden => format!(
            "{action}: access denied (403 Forbidden): {repo} is gated or private and this token has no access: request access at {endpoint}/{repo}, then retry with that account's HF_TOKEN"
        ),
        HubFailure::NotFound => format!(
            "{action}: not found (404): check that the repo {repo} exists and has the revision '{revision}' (a branch, tag or full commit of that repo; a commit of another repo is not found)"
        ),
        HubFailure::Busy(code) => format!(
            "{action}: the hub is busy or failing (HTTP {code}) after retries: try again later, or set HF_HUB_OFFLINE=1 to use what is cached"
        ),
        HubFailure::OtherStatus(code) => format!("{action}: the hub answered HTTP {code}: {error}"),
        HubFailure::Unreachable => format!(
            "{action}: cannot reach {endpoint} ({error}): check the network (or HF_ENDPOINT), or set HF_HUB_OFFLINE=1 to use the cache"
        ),
        HubFailure::Other => format!("{action}: {error}"),
    }
}

/// Runs a hub request, retrying transient failures (429, 5xx, unreachable)
/// a bounded number of times with exponential backoff.
pub fn with_retries<T>(mut request: impl FnMut() -> Result<T, ApiError>) -> Result<T, ApiError> {
    const ATTEMPTS: u32 = 3;
    let mut delay = std::time::Duration::from_millis(250);
    let mut attempt = 1;
    loop {
        match request() {
            Ok(value) => return Ok(value),
            Err(error)
                if attempt < ATTEMPTS
                    && matches!(
                        classify(&error),
                        HubFailure::Busy(_) | HubFailure::Unreachable
                    ) =>
            {
                std::thread::sleep(delay);
                delay *= 4;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}
