//! The README's test command is what CI runs: `.ci/run`'s last line,
//! character for character, and docs/testing.md shows the same line.

fn read(path: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    std::fs::read_to_string(format!("{root}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ci_command() -> String {
    let script = read(".ci/run");
    let line = script
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .expect(".ci/run has a command");
    line.trim().to_string()
}

#[test]
fn the_readme_and_testing_page_show_what_ci_runs() {
    let command = ci_command();
    assert!(
        command.contains("cargo test --locked"),
        "CI's last line runs the suite: {command}"
    );
    for page in ["README.md", "docs/testing.md"] {
        let text = read(page);
        assert!(
            text.lines().any(|l| l.trim() == command),
            "{page} does not show CI's command `{command}` on a line of its own"
        );
    }
}

#[test]
fn ci_checks_formatting_and_lints_before_the_suite() {
    let command = ci_command();
    let at = |part: &str| {
        command
            .find(part)
            .unwrap_or_else(|| panic!("CI's command lacks `{part}`: {command}"))
    };
    assert!(at("cargo fmt --check") < at("cargo test --locked"));
    assert!(at("cargo clippy --all-targets --locked -- -D warnings") < at("cargo test --locked"));
}
