//! Reading result directories back: the summary tables of a run, the
//! paper's tables beside the published numbers (`report`), and the loader
//! that `plot`, `report` and `compare` share; `compare` itself.

pub mod compare;
pub mod paper_tables;
pub mod plot;
pub mod published;
pub mod render;
pub mod results;
mod shared;
pub mod summary;
pub mod table;
pub mod tables;

pub use paper_tables::{Report, build_report};
pub use render::{Format, render};
pub use results::{Results, load};
pub use shared::{Skip, in_order};
pub use summary::{pooled_vs_sd, summary_table};
