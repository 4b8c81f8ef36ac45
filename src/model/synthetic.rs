//! The embedded default: a seeded synthetic target/draft family, no weights.
//!
//! Next-token logits are a deterministic function of the family seed and the
//! last few context tokens, shaped like a language model's:
//!
//! * a **global Zipf head**: token `i` has base logit `−zipf · ln(1 + rank(i))`
//!   under a fixed seeded ranking of the vocabulary, so a few thousand tokens
//!   carry the top-p mass at temperature 1;
//! * **context boosts**: the hash of the last `context` tokens picks
//!   `boosts` favoured tokens and raises them by a geometrically decaying
//!   amount, scaled by a per-context confidence, so some contexts are nearly
//!   deterministic and others spread out.
//!
//! The draft is the target perturbed by `1 − closeness`: a fixed per-token
//! Gaussian offset on the base, jittered boost sizes, and boosts of its own on
//! tokens the target does not favour. `closeness = 1` is the target itself
//! (SD accepts everything at equal temperatures); `closeness = 0` drafts
//! accept about a third of the time. Each position costs one copy of the base
//! vector plus a few dozen hashed updates: tens of µs at V = 50272.

use anyhow::{Result, bail};

use super::{ContextLogits, ModelInfo};
use crate::rng::splitmix64;

/// Changes whenever the logit formula changes, so manifests pin the model.
pub const SYNTHETIC_VERSION: u32 = 1;

/// End of sequence, as in OPT (`</s>`, also the BOS the tokenizer prepends).
pub const SYNTHETIC_EOS: u32 = 2;

/// Parameters of the synthetic family (the `[models.synthetic]` table).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticConfig {
    /// Vocabulary size V (OPT's is 50272).
    pub vocab: usize,
    /// Family seed: fixes the ranking, the offsets and every context's boosts.
    pub seed: u64,
    /// How alike draft and target are, in [0, 1].
    pub closeness: f64,
    /// Zipf exponent of the global head.
    pub zipf: f64,
    /// Context tokens that determine the next-token law.
    pub context: usize,
    /// Favoured tokens per context.
    pub boosts: usize,
    /// Logit boost of the most favoured token in an average context.
    pub boost: f64,
    /// Extra logit drop across the whole ranking (`−tail · rank / V`): real
    /// models' tails are thinner than a power law, which keeps hot drafts'
    /// top-p supports in the thousands rather than the whole vocabulary.
    pub tail: f64,
    /// Rank of the end-of-sequence token in the global head.
    pub eos_rank: usize,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            vocab: 50272,
            seed: 0,
            closeness: 0.5,
            zipf: 1.4,
            context: 2,
            boosts: 24,
            boost: 8.0,
            tail: 30.0,
            eos_rank: 40,
        }
    }
}

impl SyntheticConfig {
    pub fn validate(&self) -> Result<()> {
        if self.vocab < 8 {
            bail!("synthetic vocab must be at least 8 (got {})", self.vocab);
        }
        if !(0.0..=1.0).contains(&self.closeness) {
            bail!(
                "synthetic closeness must lie in [0, 1] (got {})",
                self.closeness
            );
        }
        if !(self.zipf.is_finite()
            && self.zipf >= 0.0
            && self.boost.is_finite()
            && self.boost >= 0.0
            && self.tail.is_finite()
            && self.tail >= 0.0)
        {
            bail!("synthetic zipf and boost must be finite and non-negative");
        }
        if self.context == 0 || self.boosts == 0 {
            bail!("synthetic context and boosts must be at least 1");
        }
        if self.eos_rank >= self.vocab {
            bail!("synthetic eos_rank must be below vocab ({})", self.vocab);
        }
        Ok(())
    }
}

/// Which member of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Target,
    Draft,
}

/// A synthetic language model (wrap it in [`super::HistoryLm`] to decode).
#[derive(Clone, Debug)]
pub struct SyntheticLm {
    config: SyntheticConfig,
    role: Role,
    /// Base logits (Zipf head, plus the draft's fixed offsets).
    base: Vec<f32>,
}

impl SyntheticLm {
    pub fn new(config: SyntheticConfig, role: Role) -> Result<Self> {
        config.validate()?;
        let base = base_logits(&config, role);
        Ok(Self { config, role, base })
    }

    pub fn config(&self) -> &SyntheticConfig {
        &self.config
    }

    /// Writes the logits that follow `context` into `out`.
    pub fn logits_after(&self, context: &[u32], out: &mut [f32]) {
        out.copy_from_slice(&self.base);
        let c = &self.config;
        let start = context.len().saturating_sub(c.context);
        let mut h = splitmix64(c.seed ^ 0x5EED_C0DE);
        for &t in &context[start..] {
            h = splitmix64(h ^ u64::from(t));
        }
        // Per-context confidence: some contexts are nearly deterministic.
        let confidence = 0.3 + 1.4 * unit(splitmix64(h ^ 1));
        let scale = c.boost * confidence;
        let mismatch = match self.role {
            Role::Target => 0.0,
            Role::Draft => 1.0 - c.closeness,
        };
        let vocab = c.vocab as u64;
        for m in 0..c.boosts as u64 {
            let slot = splitmix64(h ^ (m + 2).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let token = (slot % vocab) as usize;
            let decay = (-(m as f64) / 4.0).exp();
            let size = scale * decay * (0.5 + unit(splitmix64(slot)));
            // The draft misjudges how strongly each favoured token is favoured.
            let jitter = mismatch * scale * decay * gaussian(splitmix64(slot ^ 0xD1A7));
            out[token] += (size + jitter) as f32;
        }
        if mismatch > 0.0 {
            // Tokens the draft favours and the target does not.
            let hd = splitmix64(h ^ 0xD2AF_7000);
            for m in 0..(c.boosts as u64).div_ceil(2) {
                let slot = splitmix64(hd ^ (m + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
                let token = (slot % vocab) as usize;
                let decay = (-(m as f64) / 4.0).exp();
                out[token] += (mismatch * scale * decay * (0.5 + unit(splitmix64(slot)))) as f32;
            }
        }
    }
}

fn base_logits(c: &SyntheticConfig, role: Role) -> Vec<f32> {
    // A seeded ranking: rank(i) = position of i in a shuffled vocabulary,
    // with the EOS token placed at `eos_rank`.
    let mut order: Vec<u32> = (0..c.vocab as u32)
        .filter(|&t| t != SYNTHETIC_EOS)
        .collect();
    let mut state = splitmix64(c.seed ^ 0x0123_4567);
    for i in (1..order.len()).rev() {
        state = splitmix64(state);
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order.insert(c.eos_rank, SYNTHETIC_EOS);
    let mut base = vec![0.0f32; c.vocab];
    for (rank, &token) in order.iter().enumerate() {
        let rank = rank as f64;
        base[token as usize] =
            (-c.zipf * (1.0 + rank).ln() - c.tail * rank / c.vocab as f64) as f32;
    }
    if role == Role::Draft {
        let spread = 3.0 * (1.0 - c.closeness);
        for (i, b) in base.iter_mut().enumerate() {
            *b += (spread * gaussian(splitmix64(c.seed ^ 0x0D0F_F5E7 ^ ((i as u64) << 20)))) as f32;
        }
    }
    base
}

/// A uniform in [0, 1) from 53 hash bits.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal from one hash (Box–Muller on two derived uniforms).
fn gaussian(bits: u64) -> f64 {
    let u1 = unit(splitmix64(bits)).max(f64::MIN_POSITIVE);
    let u2 = unit(splitmix64(bits ^ 0xB0C5));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl ContextLogits for SyntheticLm {
    fn vocab_size(&self) -> usize {
        self.config.vocab
    }

    fn eos_token(&self) -> Option<u32> {
        Some(SYNTHETIC_EOS)
    }

    fn logits_after(&self, context: &[u32], out: &mut [f32]) {
        SyntheticLm::logits_after(self, context, out)
    }

    fn info(&self) -> ModelInfo {
        let c = &self.config;
        let role = match self.role {
            Role::Target => "target",
            Role::Draft => "draft",
        };
        ModelInfo {
            id: format!("synthetic:{role}"),
            revision: format!(
                "synthetic v{SYNTHETIC_VERSION}: vocab={} seed={} closeness={} zipf={} tail={} context={} boosts={} boost={} eos_rank={}",
                c.vocab,
                c.seed,
                c.closeness,
                c.zipf,
                c.tail,
                c.context,
                c.boosts,
                c.boost,
                c.eos_rank
            ),
            vocab: c.vocab,
            dtype: "f32".into(),
            device: "cpu".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::laws::{Processing, total_variation};
    use crate::model::{CausalLm, HistoryLm, Positions};

    fn family(closeness: f64) -> (SyntheticLm, SyntheticLm) {
        let config = SyntheticConfig {
            closeness,
            ..SyntheticConfig::default()
        };
        (
            SyntheticLm::new(config.clone(), Role::Target).unwrap(),
            SyntheticLm::new(config, Role::Draft).unwrap(),
        )
    }

    /// Mean SD acceptance `1 − TV` over 200 contexts at these temperatures.
    fn mean_acceptance(closeness: f64, draft_temp: f64) -> f64 {
        let (target, draft) = family(closeness);
        let v = target.vocab_size();
        let (mut lp, mut lq) = (vec![0.0; v], vec![0.0; v]);
        let p_proc = Processing {
            temperature: 1.0,
            top_k: None,
            top_p: 0.95,
        };
        let q_proc = Processing {
            temperature: draft_temp,
            ..p_proc
        };
        let mut sum = 0.0;
        for c in 0..200u32 {
            let context = [7, 1000 + c, 31 * c + 5];
            target.logits_after(&context, &mut lp);
            draft.logits_after(&context, &mut lq);
            let p = p_proc.apply(&lp).unwrap();
            let q = q_proc.apply(&lq).unwrap();
            sum += 1.0 - total_variation(&p, &q);
        }
        sum / 200.0
    }

    #[test]
    fn closeness_moves_acceptance_across_the_useful_range() {
        let far = mean_acceptance(0.0, 1.0);
        let mid = mean_acceptance(0.5, 1.0);
        let near = mean_acceptance(0.9, 1.0);
        let same = mean_acceptance(1.0, 1.0);
        assert!(far < 0.4, "closeness 0 accepts {far}");
        assert!(far < mid && mid < near, "{far} {mid} {near}");
        assert!(near > 0.85, "closeness 0.9 accepts {near}");
        assert!((same - 1.0).abs() < 1e-12, "identical models accept {same}");
        // Hotter drafts accept less, as with real models.
        assert!(mean_acceptance(0.5, 2.0) < mid);
    }

    #[test]
    fn logits_depend_on_the_recent_context_only_and_repeat() {
        let (target, _) = family(0.5);
        let v = target.vocab_size();
        let (mut a, mut b) = (vec![0.0; v], vec![0.0; v]);
        target.logits_after(&[1, 2, 3], &mut a);
        target.logits_after(&[9, 2, 3], &mut b);
        assert_eq!(a, b, "only the last 2 tokens matter by default");
        target.logits_after(&[1, 2, 4], &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn top_p_support_is_small_and_forward_matches_logits_after() {
        let mut target = HistoryLm::new(family(0.5).0);
        let logits = target.forward(&[&[5, 6, 7]], Positions::All).unwrap();
        let mut expect = vec![0.0; target.vocab_size()];
        for (j, prefix) in [[5u32].as_slice(), &[5, 6], &[5, 6, 7]].iter().enumerate() {
            target.model.logits_after(prefix, &mut expect);
            assert_eq!(logits.at(0, j).unwrap(), expect.as_slice());
        }
        let p = Processing {
            temperature: 1.0,
            top_k: None,
            top_p: 0.95,
        }
        .apply(logits.at(0, 2).unwrap())
        .unwrap();
        let support = p.support().len();
        assert!(support > 1 && support < 5000, "support {support}");
    }

    #[test]
    fn rows_truncate_and_select_like_a_cache() {
        let mut m = HistoryLm::new(family(0.5).0);
        m.forward(&[&[4, 5]], Positions::Last).unwrap();
        m.select_rows(&[0, 0]).unwrap();
        m.forward(&[&[6], &[7]], Positions::Last).unwrap();
        assert_eq!(m.cached_len(), 3);
        m.select_rows(&[1]).unwrap();
        m.truncate(2).unwrap();
        let after = m.forward(&[&[8]], Positions::Last).unwrap();
        let mut expect = vec![0.0; m.vocab_size()];
        m.model.logits_after(&[4, 5, 8], &mut expect);
        assert_eq!(after.at(0, 0).unwrap(), expect.as_slice());
        assert!(m.truncate(10).is_err());
        assert!(m.select_rows(&[3]).is_err());
        assert!(m.forward(&[&[1], &[2]], Positions::Last).is_err());
        assert!(m.forward(&[&[60000]], Positions::Last).is_err());
    }
}
