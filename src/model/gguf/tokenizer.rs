//! The tokenizer a GGUF file embeds (`tokenizer.ggml.*`), rebuilt as a
//! Hugging Face `tokenizers::Tokenizer`: byte-level BPE (`model = gpt2`,
//! what Llama 3, SmolLM2 and Qwen2 ship) from the token list and merges,
//! control and user-defined tokens added as special tokens, and the split
//! before BPE that llama.cpp's `pre` type names (it decides, e.g., whether
//! "2024" is one piece or four digits).

use anyhow::{Result, anyhow, bail};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior};

use super::file::GgufFile;

/// The `tokenizer.ggml.pre` types built here, by how they split.
pub const PRE_TYPES: &[&str] = &[
    "default",
    "gpt2",
    "smollm",
    "starcoder",
    "refact",
    "llama-bpe",
    "llama3",
    "qwen2",
];

/// llama.cpp's token types (`llama_token_type`).
const CONTROL: u32 = 3;
const USER_DEFINED: u32 = 4;

/// Llama 3's split (tiktoken's cl100k pattern): numbers in runs of ≤ 3.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's: as Llama 3's, but every digit alone.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The tokenizer, and the BOS id to prepend (`None` when the file says
/// not to add one).
pub fn build(file: &GgufFile) -> Result<(tokenizers::Tokenizer, Option<u32>)> {
    let model = file.string("tokenizer.ggml.model")?;
    if model != "gpt2" {
        bail!(
            "{}: tokenizer type '{model}' is not supported (byte-level BPE, 'gpt2', is): put the model's tokenizer.json beside the .gguf file",
            file.path.display()
        );
    }
    let pre = match file.value("tokenizer.ggml.pre") {
        Some(_) => file.string("tokenizer.ggml.pre")?,
        None => "default",
    };
    let pre_tokenizer = pre_tokenizer(pre).ok_or_else(|| {
        anyhow!(
            "{}: tokenizer pre-split '{pre}' is not supported ({} are): put the model's tokenizer.json beside the .gguf file",
            file.path.display(),
            PRE_TYPES.join(", ")
        )
    })?;
    let tokens = file.strings("tokenizer.ggml.tokens")?;
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let merges = file
        .strings("tokenizer.ggml.merges")?
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| anyhow!("{}: merge '{m}' is not two tokens", file.path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| anyhow!("{}: building the BPE: {e}", file.path.display()))?;
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    let types = match file.value("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .map_err(|e| anyhow!("tokenizer.ggml.token_type: {e}"))?
            .iter()
            .map(|t| t.to_i32().map(|t| t as u32).or_else(|_| t.to_u32()))
            .collect::<candle_core::Result<Vec<u32>>>()?,
        None => Vec::new(),
    };
    let special: Vec<AddedToken> = types
        .iter()
        .enumerate()
        .filter(|&(_, &t)| t == CONTROL || t == USER_DEFINED)
        .map(|(i, &t)| AddedToken::from(tokens[i].to_string(), t == CONTROL))
        .collect();
    tokenizer
        .add_special_tokens(special)
        .map_err(|e| anyhow!("{}: adding control tokens: {e}", file.path.display()))?;
    let add_bos = file.flag("tokenizer.ggml.add_bos_token").unwrap_or(false);
    let bos = match file.whole_opt("tokenizer.ggml.bos_token_id")? {
        Some(id) if add_bos => Some(id as u32),
        _ => None,
    };
    Ok((tokenizer, bos))
}

/// The split before byte-level BPE that llama.cpp's `pre` type names.
fn pre_tokenizer(pre: &str) -> Option<PreTokenizerWrapper> {
    let byte_level =
        |regex: bool| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, regex));
    let split = |pattern: &str| {
        Split::new(
            SplitPattern::Regex(pattern.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .ok()
        .map(PreTokenizerWrapper::Split)
    };
    Some(match pre {
        // GPT-2's own regex, inside the byte-level step.
        "default" | "gpt2" => byte_level(true),
        // Every digit alone, then GPT-2's regex (llama.cpp's STARCODER
        // group; SmolLM2's tokenizer.json says the same).
        "smollm" | "starcoder" | "refact" => PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            byte_level(true),
        ])),
        "llama-bpe" | "llama3" => PreTokenizerWrapper::Sequence(Sequence::new(vec![
            split(LLAMA3_SPLIT)?,
            byte_level(false),
        ])),
        "qwen2" => PreTokenizerWrapper::Sequence(Sequence::new(vec![
            split(QWEN2_SPLIT)?,
            byte_level(false),
        ])),
        _ => return None,
    })
}
