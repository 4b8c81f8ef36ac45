//! Helpers shared by integration tests.

pub mod hub_server;
