//! What `specbench run` is asked to do besides the config: where results go,
//! resume, shard, per-round records. Its own module because both the runner
//! and the manifest (which records it) read it.

use std::path::PathBuf;

use super::config::Config;

/// Everything `specbench run` needs besides the config.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub config: Config,
    /// Where the config came from (recorded in the manifest).
    pub config_source: String,
    /// Output directory; default `results/<name>` (`…/shard-i-of-N` for a shard).
    pub out: Option<PathBuf>,
    pub resume: bool,
    /// `(i, N)`, 1-based.
    pub shard: Option<(usize, usize)>,
    /// Write per-round records here (JSON lines).
    pub rounds_jsonl: Option<PathBuf>,
}
