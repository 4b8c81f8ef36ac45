//! Mutants that still break the rule, each a bug being fixed in files this
//! suite's change leaves alone (src/model/gguf/, src/model/llama.rs,
//! src/model/layers). Delete a line when its fix lands, and this file with
//! the last one: a listed mutant that passes fails the suite, so the lists
//! cannot outlive the bugs. They hold what the test build does; the
//! release sweep only prints a listed mutant that passes there.

/// The failures issue #41 names.
pub const ISSUE_41: &[&str] = &[
    // The rope tables are allocated by the declared context (an abort
    // under the 4 GiB limit), from a GGUF's metadata or a config.json.
    "gguf: kv llama.context_length = 2^31",
    "gguf: kv llama.context_length = 2^32-1",
    "config.json llama: max_position_embeddings = 2147483648",
    "config.json llama: max_position_embeddings = 4611686018427387904",
    "config.json llama: max_position_embeddings = 18446744073709551615",
    // Misaligned tensor data is read without a word.
    "gguf: tensor token_embd.weight offset + 1 (not a multiple of general.alignment)",
    "gguf: tensor token_embd.weight offset + 16 (not a multiple of general.alignment)",
    // Meaningless rope bases and norm epsilons load silently.
    "gguf: kv llama.rope.freq_base = NaN",
    "gguf: kv llama.rope.freq_base = inf",
    "gguf: kv llama.attention.layer_norm_rms_epsilon = 0",
    "gguf: kv llama.attention.layer_norm_rms_epsilon = -1e-5",
];

/// Found by this suite in the same files, beyond what the issue names.
pub const FOUND_IN_FILES_UNDER_FIX: &[&str] = &[
    // candle's GGUF reader divides the data offset by the alignment
    // (panic): gguf/file.rs hands it the file unchecked.
    "gguf: kv general.alignment = 0",
    // A tensor of no elements: candle builds a slice from an empty
    // buffer's pointer (the standard library's check aborts).
    "gguf: tensor token_embd.weight dim 0 = 0",
    "gguf: tensor token_embd.weight dim 1 = 0",
    "gguf: tensor output_norm.weight dim 0 = 0",
    "gguf: tensor blk.0.attn_norm.weight dim 0 = 0",
    "gguf: tensor blk.0.attn_q.weight dim 0 = 0",
    "gguf: tensor blk.0.attn_q.weight dim 1 = 0",
    "gguf: tensor blk.0.ffn_down.weight dim 0 = 0",
    "gguf: tensor rope_freqs.weight dim 0 = 0",
    // Dims whose product overflows: candle's element count and
    // gguf/file.rs's byte count (panic).
    "gguf: tensor token_embd.weight dim 0 = 2^62",
    "gguf: tensor token_embd.weight dim 0 = 2^64-1",
    "gguf: tensor token_embd.weight dim 1 = 2^62",
    "gguf: tensor token_embd.weight dim 1 = 2^64-1",
    "gguf: tensor output_norm.weight dim 0 = 2^62",
    "gguf: tensor output_norm.weight dim 0 = 2^64-1",
    "gguf: tensor blk.0.attn_q.weight dim 0 = 2^62",
    "gguf: tensor blk.0.attn_q.weight dim 0 = 2^64-1",
    "gguf: tensor blk.0.attn_q.weight dim 1 = 2^62",
    "gguf: tensor blk.0.attn_q.weight dim 1 = 2^64-1",
    "gguf: tensor blk.0.ffn_gate.weight dim 1 = 2^62",
    "gguf: tensor blk.0.ffn_down.weight dim 0 = 2^62",
    "gguf: tensor blk.1.attn_q.weight dim 0 = 2^62",
    "gguf: tensor blk.1.attn_v.weight dim 0 = 2^62",
    "gguf: tensor blk.1.attn_v.weight dim 0 = 2^64-1",
    "gguf: tensor blk.1.attn_v.weight dim 1 = 2^62",
    "gguf: tensor blk.1.ffn_up.weight dim 1 = 2^64-1",
    "gguf: tensor rope_freqs.weight dim 0 = 2^62",
    "gguf: tensor rope_freqs.weight dim 0 = 2^64-1",
    // An offset that overflows gguf/file.rs's end-of-data sum (panic).
    "gguf: tensor token_embd.weight offset 2^64-1",
    "gguf: tensor output_norm.weight offset 2^64-1",
    "gguf: tensor blk.0.attn_q.weight offset 2^64-1",
    "gguf: tensor blk.0.attn_output.weight offset 2^64-1",
    "gguf: tensor blk.1.ffn_norm.weight offset 2^64-1",
    "gguf: tensor rope_freqs.weight offset 2^64-1",
    // Drawn by the release sweep only: a tensor of no elements trips
    // candle's alignment assertion or gguf/weights.rs divides by it
    // (panic); a dim of 2^62 wraps the element count and the load runs
    // past the time bound.
    "gguf: tensor blk.0.attn_k.weight dim 0 = 0",
    "gguf: tensor blk.1.attn_q.weight dim 0 = 0",
    "gguf: tensor blk.1.attn_q.weight dim 1 = 0",
    "gguf: tensor blk.1.attn_q.weight dim 1 = 2^62",
    // Heads × head_dim overflows in llama.rs (panic).
    "config.json llama: num_attention_heads = 4611686018427387904",
    "config.json llama: head_dim = 4611686018427387904",
    "config.json llama: head_dim = 18446744073709551615",
];

/// Both lists.
pub fn all() -> impl Iterator<Item = &'static str> {
    ISSUE_41.iter().chain(FOUND_IN_FILES_UNDER_FIX).copied()
}
