//! Tables from result rows.

pub mod summary;

pub use summary::{pooled_vs_sd, summary_table};
