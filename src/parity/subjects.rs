//! What `parity` decodes: every cell of the sweep (target-only, SD and each
//! scheme at its K and draft temperatures), and beside them the mutants
//! that must fail — the same decoders with one known mistake each
//! (docs/exactness.md, "End to end").

use std::sync::Arc;

use anyhow::Result;

use crate::decode::{self, DecodeConfig, Generation};
use crate::experiment::Config;
use crate::experiment::plan::{Cell, Plan};
use crate::experiment::runner::{decode_config, processing_at};
use crate::laws::Processing;
use crate::model::ModelPair;
use crate::rng::SpecRng;
use crate::select::block::{self, Block, BlockRule};
use crate::select::{Scheme, SchemeSpec};

/// The target temperature the target-temperature mutant decodes at, as a
/// factor of the true one (5 %: the smallest effect to detect).
pub const TARGET_TEMP_FACTOR: f64 = 1.05;
/// The factor by which the draft-temperature mutant misreads the draft
/// temperature.
pub const DRAFT_LAW_FACTOR: f64 = 1.05;
/// The top-k the draft-top-k mutant draws its drafts with, and leaves out
/// of the law its verifier reads: transformers' default `top_k`, the
/// setting of huggingface/transformers #47932.
pub const DRAFT_TOP_K: usize = 50;

/// Whether a subject must pass (a scheme of the sweep), must fail (a
/// mutant), or is under test (another program's generations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Scheme,
    Mutant,
    External,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Scheme => "scheme",
            Role::Mutant => "mutant",
            Role::External => "external",
        }
    }
}

/// How a subject's sequences are made.
pub enum Decoder {
    /// Target-only decoding, one call per token.
    TargetOnly,
    /// A scheme through the decode engine (a mutant's wrapped scheme too).
    Scheme(Arc<dyn Scheme>),
    /// Block verification under the given rule.
    Block(BlockRule),
}

/// One line of the parity table: a scheme or a mutant at its K and draft
/// temperatures.
pub struct Subject {
    pub label: String,
    pub role: Role,
    pub k: usize,
    pub draft_temps: Vec<f64>,
    pub decoder: Decoder,
    /// How it decodes; a mutant's may differ from what the text is scored
    /// with (the target-temperature mutant's does).
    pub decode: DecodeConfig,
}

impl Subject {
    fn of_cell(cell: &Cell, config: &Config) -> Self {
        let mut decode = decode_config(cell, config);
        decode.log_nodes = false;
        Subject {
            label: cell.scheme_label(),
            role: Role::Scheme,
            k: cell.k(),
            draft_temps: cell.draft_temps().to_vec(),
            decoder: match cell.scheme() {
                None => Decoder::TargetOnly,
                Some(spec) => Decoder::Scheme(spec.shared()),
            },
            decode,
        }
    }

    /// The draft temperatures as one text: `1.2` for identical drafts,
    /// `1.2+1.6` for different ones, `-` for none.
    pub fn temps_text(&self) -> String {
        match self.draft_temps.as_slice() {
            [] => return "-".into(),
            [first, rest @ ..] if rest.iter().all(|t| t == first) => return first.to_string(),
            _ => {}
        }
        let texts: Vec<String> = self.draft_temps.iter().map(|t| t.to_string()).collect();
        texts.join("+")
    }

    /// Decodes one sequence from `prompt`.
    pub fn generate(
        &self,
        models: &mut ModelPair,
        prompt: &[u32],
        decode: &DecodeConfig,
        rng: &mut SpecRng,
    ) -> Result<Generation> {
        let (target, draft) = (models.target.as_mut(), models.draft.as_mut());
        match &self.decoder {
            Decoder::TargetOnly => decode::autoregressive(target, prompt, decode, rng),
            Decoder::Scheme(scheme) => {
                decode::generate(target, draft, prompt, scheme.as_ref(), decode, rng)
            }
            Decoder::Block(rule) => {
                let verify = |paths: &_, rng: &mut SpecRng| block::verify_with(paths, *rule, rng);
                decode::paths::generate(target, draft, prompt, &Block, &verify, decode, rng)
            }
        }
    }
}

/// The sweep's cells of the first dataset and seed as subjects, and with
/// `mutants`, the mutants of each (draft temperatures, K) after them.
pub fn plan(config: &Config, mutants: bool) -> Result<Vec<Subject>> {
    let plan = Plan::build(config)?;
    let (dataset, seed) = (config.data.datasets[0], config.sweep.seeds[0]);
    let cells: Vec<&Cell> = (plan.cells.iter())
        .filter(|c| c.dataset == dataset && c.seed == seed)
        .collect();
    let mut subjects: Vec<Subject> = cells.iter().map(|c| Subject::of_cell(c, config)).collect();
    if mutants {
        let mut settings: Vec<(usize, usize)> = Vec::new();
        for cell in cells.iter().filter(|c| c.scheme().is_some()) {
            if !settings.contains(&(cell.group, cell.k())) {
                settings.push((cell.group, cell.k()));
            }
        }
        for (group, k) in settings {
            let members: Vec<(&Cell, &SchemeSpec)> = (cells.iter())
                .filter(|c| c.group == group && c.k() == k)
                .filter_map(|c| c.scheme().map(|s| (*c, s)))
                .collect();
            subjects.extend(mutants_of(&members, config));
        }
    }
    Ok(subjects)
}

/// The mutants of one (draft temperatures, K): the target decoded 5 % hot,
/// the draft temperature misread by 5 %, and drafts drawn top-k while the
/// verifier reads q without it, each by SpecInfer where it runs (else the
/// first multi-draft walk scheme), and where block runs, block verification
/// with the token-wise residual and as vllm-ascend shipped it (#7807).
fn mutants_of(cells: &[(&Cell, &SchemeSpec)], config: &Config) -> Vec<Subject> {
    let is = |s: &SchemeSpec, id: &str| s.as_str().split(':').next() == Some(id);
    let walk = |s: &SchemeSpec| !is(s, "single") && s.scheme().decoding().is_walk();
    let preferred = (cells.iter().find(|(_, s)| is(s, "specinfer")))
        .or_else(|| cells.iter().find(|(_, s)| walk(s)))
        .or_else(|| cells.iter().find(|(_, s)| !is(s, "block")));
    let mut out = Vec::new();
    if let Some(&(cell, spec)) = preferred {
        let mut hot = mutant(
            cell,
            config,
            format!("target T×{TARGET_TEMP_FACTOR} ({spec})"),
        );
        hot.decode.target.temperature *= TARGET_TEMP_FACTOR;
        out.push(hot);
        if walk(spec) {
            let mut misread = mutant(
                cell,
                config,
                format!("q read at T×{DRAFT_LAW_FACTOR} ({spec})"),
            );
            let drafts = misread.decode.drafts.clone();
            let read_hot = |p: &Processing| Processing {
                temperature: p.temperature * DRAFT_LAW_FACTOR,
                ..*p
            };
            misread.decode.misread_drafts = Some(drafts.iter().map(read_hot).collect());
            out.push(misread);
            if drafts
                .iter()
                .all(|p| p.top_k.is_none_or(|k| k > DRAFT_TOP_K))
            {
                let mut top_k = mutant(
                    cell,
                    config,
                    format!("drafts drawn top-{DRAFT_TOP_K}, q read without it ({spec})"),
                );
                let drawn = |p: &Processing| Processing {
                    top_k: Some(DRAFT_TOP_K),
                    ..*p
                };
                top_k.decode.drafts = drafts.iter().map(drawn).collect();
                top_k.decode.misread_drafts = Some(drafts);
                out.push(top_k);
            }
        }
    }
    if let Some(&(cell, _)) = cells.iter().find(|(_, s)| is(s, "block")) {
        let mut tokenwise = mutant(cell, config, "block with the token-wise residual".into());
        tokenwise.decoder = Decoder::Block(BlockRule::TokenWiseResidual);
        out.push(tokenwise);
        let mut shipped = mutant(cell, config, "block as vllm-ascend #7807 shipped it".into());
        shipped.decoder = Decoder::Block(BlockRule::Shipped7807);
        out.push(shipped);
    }
    out
}

/// A cell's subject as a mutant named `what`.
fn mutant(cell: &Cell, config: &Config, what: String) -> Subject {
    let mut subject = Subject::of_cell(cell, config);
    subject.role = Role::Mutant;
    subject.label = format!("mutant: {what}");
    subject
}

/// The target's processing the text is scored under: the config's, never
/// a mutant's.
pub fn scoring(config: &Config) -> crate::laws::Processing {
    processing_at(config, config.decode.target_temp)
}
