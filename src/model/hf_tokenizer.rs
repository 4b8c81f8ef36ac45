//! Hugging Face tokenizers (the `tokenizers` crate): from `tokenizer.json`,
//! or built from GPT-2 style `vocab.json` + `merges.txt` the way the OPT
//! repos expect (byte-level BPE, no prefix space, `</s>` prepended).

use std::path::Path;
use std::str::FromStr;

use anyhow::{Result, anyhow};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::PostProcessorWrapper;
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
            TokenizerFiles::Json(path) => from_json(path)?,
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

/// A `tokenizer.json`, checked where the tokenizers crate would panic on
/// a damaged file instead of failing: a number JSON cannot hold panics
/// inside its decoder's parser, and a template naming a special token it
/// does not define loads (its builder's checks are skipped) and then
/// panics on the first text encoded.
fn from_json(path: &Path) -> Result<tokenizers::Tokenizer> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow!("reading {}: {e}", path.display()))?;
    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
        anyhow!(
            "{} is not valid JSON ({e}): download the tokenizer again",
            path.display()
        )
    })?;
    let tokenizer = tokenizers::Tokenizer::from_str(&text)
        .map_err(|e| anyhow!("reading {}: {e}", path.display()))?;
    if let Some(processor) = tokenizer.get_post_processor() {
        check_templates(processor).map_err(|e| {
            anyhow!(
                "{}: post_processor: {e}: download the tokenizer again",
                path.display()
            )
        })?;
    }
    Ok(tokenizer)
}

/// Every template processor rebuilt through its builder, which checks
/// that the templates' special tokens are defined.
fn check_templates(processor: &PostProcessorWrapper) -> Result<()> {
    match processor {
        PostProcessorWrapper::Template(t) => {
            TemplateProcessing::builder()
                .single(t.single.clone())
                .pair(t.get_pair().clone())
                .special_tokens(t.get_special_tokens().clone())
                .build()
                .map_err(|e| anyhow!("{e}"))?;
        }
        PostProcessorWrapper::Sequence(s) => {
            s.as_ref().iter().try_for_each(check_templates)?;
        }
        _ => {}
    }
    Ok(())
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
