#!/usr/bin/env bash
# The quick tier: what a contributor runs between edits, about 2 minutes on
# 2 cores after the build (docs/testing.md, "The quick tier"). It runs the
# unit tests and every integration test except the long ones named below:
# exactness at small vocabularies, the broken-scheme controls, one run end to
# end, parity's few-sequence check on the tiny Gemma 3 pair, the readers'
# bad-input tests, the docs and layering checks. The full suite (the README's
# command, what CI runs) is still the one that decides.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each name is a test-name filter (libtest's --skip matches substrings).
long=(
    exactness::every_scheme_passes_the_sampling_tests_at_full_vocabulary
    parity::every_scheme_and_mode_passes
    parity::another_programs_generations
    parity::the_block_rule_vllm_ascend_shipped_is_caught
    parity::the_target_temperature_mutant_is_caught_with_margin
    parity::plot_draws_a_parity_run
    parity_smollm2::
    gguf_smollm2::
    mutation::
    sequence::
    vocab_256k::
    fast_paths::
    golden_models::rows_fed_the_same_tokens_in_one_call_get_the_same_logits_bit_for_bit
    gls::gls_text_over_several_rounds_has_the_targets_law
    gpu_check::
    run_resume::
    optimal_window::exact_law_and_zero_gap_on_small_nodes
    optimal_decode::
    run::generations_hold_the_scored_text_on_the_trained_tiny_pair
    run::random_weight_opt_shapes_run_end_to_end_without_a_download
    placement::
    quant_kernels::
)
skips=()
for name in "${long[@]}"; do
    skips+=(--skip "$name")
done
cargo test --locked --lib "$@"
cargo test --locked --test it "$@" -- "${skips[@]}"
