//! What the schemes are built from, apart from the schemes themselves
//! (each in `select/`, named by its registry id): draft laws and their
//! samplers, the max-flow, the two-step sampler, the pair rules of the
//! paper's IS and their tournament, and the orders and filters they share.

pub mod draft;
pub mod flow;
pub mod id_filter;
pub mod lazy;
pub mod pair;
pub mod pstar;
pub mod tournament;
pub mod two_step;
pub mod weighted;
