//! The integration tests, built as one binary: one module per topic.
//!
//! One binary because each test binary links candle, tokenizers, the hub
//! client and parquet: as 28 binaries they were most of the suite's build
//! time and 13 GB of `target/debug` on CI. Run one topic with
//! `cargo test --test it <module>::` (e.g. `cargo test --test it exactness::`).

mod common;

mod block;
mod broken;
mod ci_command;
mod cli;
mod compare;
mod data_local;
mod data_parquet;
mod doc_examples;
mod doc_paths;
mod ersd;
mod exactness;
mod failed_cells;
mod fast_paths;
mod gbv;
mod gguf_families;
mod gguf_smollm2;
mod gguf_tiny;
mod global_resolution;
mod gls;
mod golden_models;
mod gpu_check;
mod hsd;
mod hub_download;
mod hub_errors;
mod layering;
mod linear;
mod machines;
mod memory_plan;
mod mutation;
mod optimal_decode;
mod optimal_window;
mod parity;
mod parity_cost;
mod parity_gemma;
mod parity_smollm2;
mod placement;
mod plot;
mod plot_inputs;
mod quality;
mod quant_kernels;
mod report;
mod round_bound;
mod run;
mod run_resume;
mod sequence;
mod settings_table;
mod slurm;
mod spechub;
mod threads;
mod tiny_models;
mod traversal;
mod trunk;
mod vectors;
mod vocab_256k;
