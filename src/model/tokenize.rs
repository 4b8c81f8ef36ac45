//! Text → token ids. Real models bring their own tokenizer (Hugging Face
//! BPE); the synthetic models use [`WordHashTokenizer`].

use anyhow::Result;

/// Encodes a rendered prompt, BOS included.
pub trait Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>>;

    /// Ids → text (prompt truncation needs it).
    fn decode(&self, ids: &[u32]) -> Result<String>;

    /// Names the tokenizer in the manifest.
    fn id(&self) -> String;
}

/// The synthetic models' tokenizer: BOS (`</s>`, id 2, as OPT) then one id
/// per whitespace-separated word, hashed (FNV-1a) into `4..vocab` so that the
/// special ids 0–3 never occur. Not invertible, and it need not be: the
/// synthetic models are scored on speed and exactness, not on text.
#[derive(Clone, Debug)]
pub struct WordHashTokenizer {
    pub vocab: usize,
}

pub const BOS: u32 = 2;

impl Tokenizer for WordHashTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let span = (self.vocab - 4) as u64;
        let mut ids = vec![BOS];
        for word in text.split_whitespace() {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in word.bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
            ids.push(4 + (h % span) as u32);
        }
        Ok(ids)
    }

    fn decode(&self, _ids: &[u32]) -> Result<String> {
        anyhow::bail!(
            "the synthetic word-hash tokenizer cannot decode (it is not invertible): prompts for the synthetic models are never truncated"
        )
    }

    fn id(&self) -> String {
        format!("word-hash (FNV-1a into 4..{})", self.vocab)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_map_to_stable_non_special_ids_after_bos() {
        let t = WordHashTokenizer { vocab: 50272 };
        let ids = t.encode("Article: the cat\nSummary:").unwrap();
        assert_eq!(ids.len(), 5);
        assert_eq!(ids[0], BOS);
        assert!(ids[1..].iter().all(|&i| (4..50272).contains(&i)));
        assert_eq!(ids[2], t.encode("the").unwrap()[1]);
    }
}
