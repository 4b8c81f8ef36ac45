//! The library's layers (`docs/layout.md`): a module may use modules on its own
//! floor or below, never above. The check reads every `crate::<module>`
//! path in code (comments are skipped), so an upward import — like the one
//! that once made `model/` read `experiment::config` — fails here by name.

use std::path::{Path, PathBuf};

/// Top-level modules by floor, lowest (floor 1) first.
const FLOORS: &[&[&str]] = &[
    &["laws", "rng", "quality", "threads", "hub", "fast"],
    &["model", "select"],
    &["data", "decode", "theory", "inspect"],
    &["exactness"],
    &["experiment", "bench", "parity"],
    &["report"],
    &["cli"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS
        .iter()
        .position(|floor| floor.contains(&module))
        .map(|index| index + 1)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None`: lib.rs, main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// Every `crate::name` in the code of `text` (line comments dropped), up
/// to the file's `#[cfg(test)]` module: unit tests may draw instances from
/// higher floors (`exactness`'s generators) without the library depending on them.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((number + 1, name));
            rest = tail;
        }
    }
    found
}

#[test]
fn every_module_imports_only_its_own_floor_or_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let floor = floor_of(&module)
            .unwrap_or_else(|| panic!("src/{module} is on no floor: add it to FLOORS"));
        let text = std::fs::read_to_string(file).unwrap();
        for (line, used) in crate_paths(&text) {
            let used_floor =
                floor_of(&used).unwrap_or_else(|| panic!("crate::{used} is on no floor"));
            if used_floor > floor {
                upward.push(format!(
                    "{}:{line}: {module} (floor {floor}) uses crate::{used} (floor {used_floor})",
                    file.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import() {
    let found = crate_paths(
        "use crate::experiment::config::Models; // crate::report\n#[cfg(test)]\nuse crate::cli;\n",
    );
    assert_eq!(found, vec![(1, "experiment".to_string())]);
    assert!(floor_of("experiment") > floor_of("model"));
}

/// clap belongs to the command line: the library below `cli` takes plain
/// values (`experiment::Overrides`, which `cli::OverrideFlags` fills), so
/// no file outside `src/cli/` and `main.rs` derives or names clap in code.
#[test]
fn only_the_command_line_uses_clap() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        if module == "cli" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if ["clap::", "use clap", "#[arg(", "#[command("]
                .iter()
                .any(|needle| code.contains(needle))
            {
                found.push(format!(
                    "{}:{}: {}",
                    file.strip_prefix(&src).unwrap().display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(files.len() > 100, "only {} source files found", files.len());
    assert!(
        found.is_empty(),
        "clap outside src/cli/:\n{}",
        found.join("\n")
    );
}
