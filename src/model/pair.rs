//! Loading the draft/target pair a [`PairSpec`] names: the synthetic
//! family, random-weight OPT shapes, or real checkpoints that must share a
//! tokenizer and (up to padding) a vocabulary.

use anyhow::{Result, bail};

use super::device::DeviceChoice;
use super::synthetic::{self, SyntheticLm};
use super::tokenize::WordHashTokenizer;
use super::{CausalLm, HistoryLm, ModelPair, ModelSpec, PairSpec, Tokenizer};
use super::{aligned, checkpoint, random};

/// Loads the pair a spec names: `synthetic` (the embedded family, with
/// `synthetic` parameters), `random:opt-<size>` shapes with random weights,
/// or real checkpoints (directories or hub ids).
pub fn load_pair(spec: &PairSpec) -> Result<ModelPair> {
    let (target, draft) = (spec.target.name.as_str(), spec.draft.name.as_str());
    let synthetic = &spec.synthetic;
    match (target, draft) {
        ("synthetic", "synthetic") => {
            for side in [&spec.target, &spec.draft] {
                if side.device.list() != [DeviceChoice::Cpu] {
                    bail!(
                        "the synthetic models run on one CPU (device '{}'): use --device cpu, or name real models",
                        side.device
                    );
                }
            }
            Ok(ModelPair {
                target: Box::new(HistoryLm::new(SyntheticLm::new(
                    synthetic.clone(),
                    synthetic::Role::Target,
                )?)),
                draft: Box::new(HistoryLm::new(SyntheticLm::new(
                    synthetic.clone(),
                    synthetic::Role::Draft,
                )?)),
                tokenizer: Box::new(WordHashTokenizer {
                    vocab: synthetic.vocab,
                }),
            })
        }
        (t, d) if random::is_random(t) || random::is_random(d) => random::load_random_pair(spec),
        ("synthetic", other) | (other, "synthetic") => bail!(
            "model '{other}' is paired with a synthetic model: use synthetic for both, or real checkpoints for both"
        ),
        _ => load_real_pair(spec),
    }
}

/// Target and draft checkpoints that share one vocabulary and tokenizer.
fn load_real_pair(spec: &PairSpec) -> Result<ModelPair> {
    let options = |side: &ModelSpec| -> Result<checkpoint::LoadOptions> {
        let devices = (side.device.list().iter())
            .map(|d| d.open())
            .collect::<Result<Vec<_>>>()?;
        let split = (devices.len() > 1).then(|| checkpoint::Split {
            devices: devices.clone(),
            counts: side.layer_counts.clone(),
        });
        Ok(checkpoint::LoadOptions {
            revision: side.revision.clone(),
            device: devices[0].clone(),
            dtype: side.precision().dtype(),
            gguf: crate::model::gguf::GgufOptions {
                requant: side.requant,
                matmul: side.matmul,
                ..Default::default()
            },
            split,
        })
    };
    let target = checkpoint::load_checkpoint(&spec.target.name, &options(&spec.target)?)?;
    let draft = checkpoint::load_checkpoint(&spec.draft.name, &options(&spec.draft)?)?;
    let tokenizer = target.tokenizer.ok_or_else(|| {
        anyhow::anyhow!(
            "model '{}' ships no tokenizer (tokenizer.json, or vocab.json + merges.txt)",
            spec.target.name
        )
    })?;
    if let Some(draft_tokenizer) = &draft.tokenizer {
        let probe = "Speculative sampling: drafts, targets, 1234 ÄÖÜ.";
        if draft_tokenizer.encode(probe)? != tokenizer.encode(probe)? {
            bail!(
                "draft/target tokenizer mismatch: {} and {} tokenize the same text differently: use a pair from one model family",
                spec.target.name,
                spec.draft.name
            );
        }
    }
    let (tv, dv) = (target.model.vocab_size(), draft.model.vocab_size());
    let shared = tv.min(dv);
    if tv != dv && tokenizer.vocab_size() > shared {
        bail!(
            "draft/target vocabulary mismatch: {} has {tv} logits and {} has {dv}, and the tokenizer has {} ids: use a draft and target from one model family",
            spec.target.name,
            spec.draft.name,
            tokenizer.vocab_size()
        );
    }
    // Widths that differ only past the tokenizer's ids (Qwen2.5 0.5B vs 7B)
    // are cut to the shared width.
    let (target_model, draft_model): (Box<dyn CausalLm>, Box<dyn CausalLm>) = if tv == dv {
        (target.model, draft.model)
    } else {
        (
            Box::new(aligned::Aligned::new(target.model, shared)),
            Box::new(aligned::Aligned::new(draft.model, shared)),
        )
    };
    Ok(ModelPair {
        target: target_model,
        draft: draft_model,
        tokenizer: Box::new(tokenizer),
    })
}
