//! `optimal` through the real decoder: at every node of every round with
//! identical drafts, the selection acceptance it logs (`accept`) equals the
//! `P*` logged beside it, at K = 2, 4 and 8. Synthetic models always; the
//! trained tiny pair in `models/`.

use std::path::Path;

use crate::common::tiny;
use specbench::decode::{DecodeConfig, Generation, generate};
use specbench::laws::Processing;
use specbench::model::checkpoint::{LoadOptions, load_checkpoint};
use specbench::model::synthetic::Role;
use specbench::model::{CausalLm, HistoryLm, SyntheticConfig, SyntheticLm};
use specbench::rng::SpecRng;
use specbench::select::build;

fn decode(
    target: &mut dyn CausalLm,
    draft: &mut dyn CausalLm,
    k: usize,
    prompt: &[u32],
) -> Generation {
    let processing = Processing {
        temperature: 1.0,
        top_k: None,
        top_p: 0.95,
    };
    let config = DecodeConfig {
        draft_len: 4,
        max_new_tokens: 24,
        target: processing,
        drafts: vec![processing; k],
        log_nodes: true,
        rank_calibration: Default::default(),
        misread_drafts: None,
        trunk: 0,
    };
    let scheme = build("optimal").unwrap();
    generate(
        target,
        draft,
        prompt,
        scheme.as_ref(),
        &config,
        &mut SpecRng::new(k as u64),
    )
    .unwrap()
}

fn assert_accept_is_pstar(g: &Generation, what: &str) -> usize {
    let mut nodes = 0;
    for round in &g.rounds {
        for node in &round.nodes {
            let (Some(accept), Some(pstar)) = (node.accept, node.pstar) else {
                panic!("{what}: node without accept/pstar: {node:?}");
            };
            assert!(
                (accept - pstar).abs() < 1e-9,
                "{what}: accept {accept} vs P* {pstar}"
            );
            nodes += 1;
        }
    }
    assert_eq!(g.fallbacks, 0, "{what}");
    nodes
}

#[test]
fn synthetic_pair_accepts_at_pstar_for_k_2_4_8() {
    let config = SyntheticConfig {
        vocab: 512,
        ..SyntheticConfig::default()
    };
    for k in [2, 4, 8] {
        let mut target = HistoryLm::new(SyntheticLm::new(config.clone(), Role::Target).unwrap());
        let mut draft = HistoryLm::new(SyntheticLm::new(config.clone(), Role::Draft).unwrap());
        let g = decode(&mut target, &mut draft, k, &[5, 9, 11]);
        let nodes = assert_accept_is_pstar(&g, &format!("synthetic K={k}"));
        assert!(nodes > 0);
    }
}

#[test]
fn trained_tiny_pair_accepts_at_pstar_for_k_2_4_8() {
    let (target_dir, draft_dir) = (tiny("tiny-opt-target"), tiny("tiny-opt-draft"));
    let load = |dir: &Path| {
        load_checkpoint(dir.to_str().unwrap(), &LoadOptions::default())
            .unwrap()
            .model
    };
    for k in [2, 4, 8] {
        let (mut target, mut draft) = (load(&target_dir), load(&draft_dir));
        let g = decode(target.as_mut(), draft.as_mut(), k, &[2, 100, 200, 300]);
        let nodes = assert_accept_is_pstar(&g, &format!("tiny pair K={k}"));
        assert!(nodes > 0);
    }
}
