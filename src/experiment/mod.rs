//! The sweep: config (TOML), plan of cells, runner, resume/shard/merge, and
//! the files a run writes (`cells.csv`, `generations.jsonl`, `manifest.json`, per-round JSONL).

pub mod cell;
pub mod config;
pub mod fetch;
pub mod generations;
pub mod machine;
pub mod manifest;
pub mod memory;
pub mod merge;
pub mod metrics;
pub mod options;
pub mod output;
pub mod plan;
pub mod preview;
pub mod progress;
pub mod prompts;
pub mod quality_columns;
pub mod run_dir;
pub mod runner;
pub mod settings;
pub mod split;

pub use config::Config;
pub use options::RunOptions;
pub use runner::{RunReport, run};
pub use settings::Overrides;
