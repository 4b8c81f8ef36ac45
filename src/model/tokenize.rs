//! Text → token ids. Real models bring their own tokenizer (Hugging Face
//! BPE); the synthetic models use [`WordHashTokenizer`], random-weight OPT
//! shapes [`ByteTokenizer`].

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

/// Random-weight models' tokenizer: BOS (id 2, as OPT) then one id per
/// UTF-8 byte, `4 + byte`. Invertible, so long prompts can be truncated
/// like real ones; about four times as many tokens as OPT's BPE.
#[derive(Clone, Debug)]
pub struct ByteTokenizer;

impl ByteTokenizer {
    /// Ids used: the four specials and 256 bytes.
    pub const VOCAB: usize = 260;
}

impl Tokenizer for ByteTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(std::iter::once(BOS)
            .chain(text.bytes().map(|b| 4 + u32::from(b)))
            .collect())
    }

    fn decode(&self, ids: &[u32]) -> Result<String> {
        // A cut inside a multi-byte character leaves a replacement char.
        let bytes: Vec<u8> = ids
            .iter()
            .filter_map(|&id| u8::try_from(id.checked_sub(4)?).ok())
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn id(&self) -> String {
        "bytes (UTF-8 byte b → id 4 + b, BOS 2)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_after_bos() {
        let ids = ByteTokenizer.encode("Zürich 1").unwrap();
        assert_eq!(ids[0], BOS);
        assert_eq!(ids.len(), 1 + "Zürich 1".len());
        assert!(ids.iter().all(|&i| (i as usize) < ByteTokenizer::VOCAB));
        assert_eq!(ByteTokenizer.decode(&ids).unwrap(), "Zürich 1");
        assert_eq!(ByteTokenizer.decode(&ids[3..]).unwrap(), "\u{fffd}rich 1");
    }

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
