//! What the round-law tests share: the largest gap between two string laws
//! and the round models of a tree instance.

use specbench::decode::exact::{RoundModels, StringLaw};
use specbench::laws::Dist;
use specbench::verify::instances::TreeInstance;

/// The largest absolute gap between two laws over every string either has.
pub fn max_difference(a: &StringLaw, b: &StringLaw) -> f64 {
    let keys: std::collections::BTreeSet<&Vec<u32>> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| (a.get(k).unwrap_or(&0.0) - b.get(k).unwrap_or(&0.0)).abs())
        .fold(0.0, f64::max)
}

/// Runs `check` with the round models of a tree instance: K identical
/// draft rows.
pub fn with_models<T>(
    inst: &TreeInstance,
    k: usize,
    check: impl FnOnce(&RoundModels, &dyn Fn(&[u32]) -> Dist) -> T,
) -> T {
    let target = |prefix: &[u32]| inst.laws(prefix).0;
    let draft = |_: usize, prefix: &[u32]| inst.laws(prefix).1;
    let models = RoundModels {
        target: &target,
        draft: &draft,
        drafts: k,
        identical: true,
    };
    check(&models, &target)
}
