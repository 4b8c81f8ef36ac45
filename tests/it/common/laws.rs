//! What the round-law tests share: the largest gap between two string
//! laws, which the library's round checks use too.

pub use specbench::decode::exact::max_difference;
