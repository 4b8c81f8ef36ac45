//! Hugging Face tokenizers (the `tokenizers` crate): from `tokenizer.json`,
//! or built from GPT-2 style `vocab.json` + `merges.txt` the way the OPT
//! repos expect (byte-level BPE, no prefix space, `</s>` prepended).

use anyhow::{Result, anyhow};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::template::TemplateProcessing;

use super::hub::TokenizerFiles;
use super::tokenize::Tokenizer;

/// A Hugging Face tokenizer that guarantees the model's BOS comes first.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    /// Prepended when the tokenizer's own post-processor does not (OPT:
    /// `</s>`, id 2).
    bos: Option<u32>,
    id: String,
}

impl HfTokenizer {
    pub fn load(files: &TokenizerFiles, bos: Option<u32>, id: String) -> Result<Self> {
        let inner = match files {
            TokenizerFiles::Json(path) => tokenizers::Tokenizer::from_file(path)
                .map_err(|e| anyhow!("reading {}: {e}", path.display()))?,
            TokenizerFiles::VocabMerges { vocab, merges } => {
                gpt2_bpe(&vocab.to_string_lossy(), &merges.to_string_lossy(), bos)?
            }
        };
        Ok(Self { inner, bos, id })
    }

    /// An already built tokenizer (a GGUF file's).
    pub fn from_tokenizer(inner: tokenizers::Tokenizer, bos: Option<u32>, id: String) -> Self {
        Self { inner, bos, id }
    }

    pub fn with_id(self, id: String) -> Self {
        Self { id, ..self }
    }

    /// Ids the tokenizer knows, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// GPT-2 byte-level BPE as `GPT2Tokenizer` builds it for OPT.
fn gpt2_bpe(vocab: &str, merges: &str, bos: Option<u32>) -> Result<tokenizers::Tokenizer> {
    let bpe = BPE::from_file(vocab, merges)
        .build()
        .map_err(|e| anyhow!("reading {vocab} and {merges}: {e}"))?;
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    if let Some(bos) = bos {
        let token = tokenizer
            .id_to_token(bos)
            .ok_or_else(|| anyhow!("{vocab} has no token with the BOS id {bos}"))?;
        let template = TemplateProcessing::builder()
            .try_single(format!("{token} $A"))
            .map_err(|e| anyhow!("{e}"))?
            .try_pair(format!("{token} $A $B"))
            .map_err(|e| anyhow!("{e}"))?
            .special_tokens(vec![(token, bos)])
            .build()
            .map_err(|e| anyhow!("{e}"))?;
        tokenizer.with_post_processor(Some(template));
    }
    Ok(tokenizer)
}

impl Tokenizer for HfTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, true)
            .map_err(|e| anyhow!("tokenizing: {e}"))?;
        let mut ids = encoding.get_ids().to_vec();
        if let Some(bos) = self.bos
            && ids.first() != Some(&bos)
        {
            ids.insert(0, bos);
        }
        Ok(ids)
    }

    /// Token strings → text (special tokens kept).
    fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| anyhow!("decoding ids: {e}"))
    }

    fn id(&self) -> String {
        self.id.clone()
    }
}
