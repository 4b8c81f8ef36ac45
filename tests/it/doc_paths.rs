//! Every repository path the docs and READMEs cite in running text
//! (`src/…`, `tests/…`, `docs/…`, `scripts/…`, `experiments/…`) exists, so
//! a rename cannot leave a reader at a file that is gone. A file
//! docs/extending.md has a reader write, as a worked example, counts when
//! the file compiled in its place exists (`doc_examples::EXAMPLES`). Paths
//! in fenced code blocks are not checked; neither are `results/…` and
//! `plots/…`, which name a run's output (the committed runs are checked
//! against `.gitignore` instead).

use std::path::Path;

use super::doc_examples::EXAMPLES;

/// The file that stands for `path`: the compiled example for a file the
/// docs have a reader write, else the path itself.
fn real_path(path: &str) -> &str {
    EXAMPLES
        .iter()
        .find(|(written, _)| *written == path)
        .map_or(path, |(_, compiled)| compiled)
}

/// The pages a reader reads: docs/*.md and the READMEs.
fn pages(root: &Path) -> Vec<std::path::PathBuf> {
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.push(root.join("README.md"));
    pages.push(root.join("models/README.md"));
    pages
}

/// The cited paths of `text` outside fenced code blocks.
fn cited_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (start, _) in line.match_indices(['s', 't', 'd', 'e']) {
            let before = line[..start].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || "/._-".contains(c)) {
                continue;
            }
            let rest = &line[start..];
            let roots = ["src/", "tests/", "docs/", "scripts/", "experiments/"];
            if !roots.iter().any(|r| rest.starts_with(r)) {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || "/._-+".contains(c)))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches('.');
            if !path.contains(['*', '<', '{']) {
                paths.push(path.to_string());
            }
        }
    }
    paths
}

#[test]
fn every_path_the_docs_cite_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = pages(root);
    let mut missing = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for path in cited_paths(&text) {
            checked += 1;
            if !root.join(real_path(&path)).exists() {
                missing.push(format!("{}: {path}", page.display()));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "cited paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// No source file cites the reference texts the project started from by
/// their old names: this repository does not have them, and its docs
/// pages hold the same sections (docs/layout.md, its last paragraph).
#[test]
fn the_source_cites_docs_pages_not_the_starting_texts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests"] {
        sources(&root.join(dir), &mut files);
    }
    // Spelled in parts, so this file does not cite them itself.
    let names: Vec<String> = ["SCHEMES", "TEST_VECTORS", "PAPER", "DATA"]
        .iter()
        .map(|n| format!("{n}.md"))
        .collect();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for name in names.iter().filter(|n| text.contains(n.as_str())) {
            found.push(format!("{}: {name}", file.display()));
        }
    }
    assert!(files.len() > 100, "only {} source files found", files.len());
    assert!(
        found.is_empty(),
        "cite the docs page instead:\n{}",
        found.join("\n")
    );
}

/// Every run the docs and README link to (`](results/NAME)`), and every
/// run they name that exists here (`results/NAME`), is one `.gitignore`
/// keeps (`!/results/NAME/`): a run made and cited but never committed is
/// a broken link on a fresh clone. Names of runs a reader makes
/// (`results/default`) exist only once made, and are not checked.
#[test]
fn every_run_the_docs_cite_is_committed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let gitignore = std::fs::read_to_string(root.join(".gitignore")).unwrap();
    let mut cited = Vec::new();
    for page in &pages(root) {
        let text = std::fs::read_to_string(page).unwrap();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            for (start, _) in line.match_indices("results/") {
                let rest = &line[start + "results/".len()..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || "._-".contains(c)))
                    .unwrap_or(rest.len());
                let name = rest[..end].trim_end_matches('.');
                let linked = line[..start].ends_with("](") || line[..start].ends_with("](../");
                let made_here = !name.is_empty() && root.join("results").join(name).is_dir();
                if linked || made_here {
                    cited.push((page.clone(), name.to_string()));
                }
            }
        }
    }
    assert!(cited.iter().any(|(_, name)| name == "tiny"), "{cited:?}");
    let missing: Vec<_> = (cited.iter())
        .filter(|(_, name)| !gitignore.contains(&format!("!/results/{name}/")))
        .map(|(page, name)| format!("{}: results/{name}", page.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "cited runs .gitignore does not keep (add `!/results/NAME/`, commit the run): {missing:#?}"
    );
}
