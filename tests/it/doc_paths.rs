//! Every repository path the docs and READMEs cite in running text
//! (`src/…`, `tests/…`, `docs/…`, `scripts/…`, `experiments/…`) exists, so
//! a rename cannot leave a reader at a file that is gone; every link and
//! section anchor the docs and the source cite leads to a page and heading
//! that exist; schemes are cited by their page, never by a section letter
//! (letters move when a section is inserted); and every scheme of the
//! registry has its page, named by its id (`docs/schemes.md`, the index). A file
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

/// The `.md` files directly in `dir`.
fn markdown_in(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

/// The pages a reader reads: docs/*.md, each scheme's page in
/// docs/schemes/ and the READMEs.
fn pages(root: &Path) -> Vec<std::path::PathBuf> {
    let mut pages = markdown_in(&root.join("docs"));
    pages.extend(markdown_in(&root.join("docs/schemes")));
    pages.push(root.join("README.md"));
    pages.push(root.join("models/README.md"));
    pages
}

/// The lines of a markdown text outside fenced code blocks (the fences
/// themselves left out too).
fn unfenced_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The cited paths of `text` outside fenced code blocks.
fn cited_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in unfenced_lines(text) {
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
        for line in unfenced_lines(&text) {
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

/// The anchor GitHub gives a heading: lower case, punctuation dropped
/// (hyphens and underscores kept), spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown page's headings (outside fenced code).
fn anchors(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    unfenced_lines(&text)
        .filter(|line| line.starts_with('#'))
        .map(|line| slug(line.trim_start_matches('#')))
        .collect()
}

/// Whether `target` (a path, possibly with `#anchor`, resolved against
/// `base`) names a file that exists and, where given, a heading in it.
fn resolves(base: &Path, target: &str, own: &Path) -> Result<(), String> {
    let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
    let path = if file.is_empty() {
        own.to_path_buf()
    } else {
        base.join(file)
    };
    if !path.exists() {
        return Err(format!("{target}: no such file"));
    }
    if !anchor.is_empty() && !anchors(&path).iter().any(|a| a == anchor) {
        return Err(format!("{target}: no heading with that anchor"));
    }
    Ok(())
}

/// The relative link targets of a markdown page, outside fenced code.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in unfenced_lines(text) {
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
        }
    }
    out
}

/// Checks every target `targets_of` finds in each of `files`, resolved
/// from the folder `base` gives for that file: at least 100 of them (a scan
/// that finds nothing must not pass), and none leading nowhere.
fn assert_all_resolve(
    files: &[std::path::PathBuf],
    targets_of: fn(&str) -> Vec<String>,
    base: impl Fn(&Path) -> std::path::PathBuf,
    what: &str,
) {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let base = base(file);
        for target in targets_of(&text) {
            checked += 1;
            let own = if file.extension().is_some_and(|e| e == "md") {
                file.as_path()
            } else {
                base.as_path()
            };
            if let Err(e) = resolves(&base, &target, own) {
                broken.push(format!("{}: {e}", file.display()));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} {what} found: is the scan broken?"
    );
    assert!(
        broken.is_empty(),
        "{what} that lead nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_link_and_anchor_the_docs_give_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = |page: &Path| page.parent().unwrap().to_path_buf();
    assert_all_resolve(&pages(root), link_targets, base, "links");
}

/// The files a citation can sit in: the source, the tests, the configs.
fn citing_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "tests"] {
        sources(&root.join(dir), &mut files);
    }
    files.extend(
        std::fs::read_dir(root.join("experiments"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml")),
    );
    files
}

/// Every `docs/<page>.md[#anchor]` cited in `text`.
fn docs_citations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("docs/") {
        if text[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '/')
        {
            continue;
        }
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || "/._-#".contains(c)))
            .unwrap_or(rest.len());
        let cited = rest[..end].trim_end_matches('.');
        if cited.contains(".md") {
            out.push(cited.to_string());
        }
    }
    out
}

#[test]
fn every_page_and_section_the_source_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = citing_files(root);
    assert_all_resolve(&files, docs_citations, |_| root.to_path_buf(), "citations");
}

/// A scheme cited by a section letter (the section sign, or the index page
/// name, followed by a lone letter): the letters move when a section is inserted, a page name does not.
fn letter_citations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices('§') {
        let next = text[at + '§'.len_utf8()..].chars().next();
        if next.is_some_and(|c| c.is_ascii_lowercase()) {
            found.push(text[at..].chars().take(12).collect());
        }
    }
    for (at, _) in text.match_indices("schemes.md") {
        let rest = text[at + "schemes.md".len()..].trim_start_matches(['`', ')', ',']);
        let mut chars = rest.chars();
        let (space, letter, after) = (chars.next(), chars.next(), chars.next());
        let lone_letter = letter.is_some_and(|c| ('a'..='q').contains(&c))
            && !after.is_some_and(char::is_alphanumeric);
        if space == Some(' ') && lone_letter {
            found.push(text[at..].chars().take(24).collect());
        }
    }
    found
}

#[test]
fn schemes_are_cited_by_page_not_by_letter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = citing_files(root);
    files.extend(pages(root));
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for cite in letter_citations(&text) {
            found.push(format!("{}: {cite}", file.display()));
        }
    }
    let probe = format!("see {}k and docs/schemes{}` k)", '§', ".md");
    assert_eq!(
        letter_citations(&probe).len(),
        2,
        "the letter scan is broken"
    );
    assert!(
        found.is_empty(),
        "cite the scheme's page (docs/schemes/<id>.md) instead:\n{}",
        found.join("\n")
    );
}

/// The rows of the index table in docs/schemes.md: (ids, page linked).
fn index_rows(root: &Path) -> Vec<(Vec<String>, String)> {
    let text = std::fs::read_to_string(root.join("docs/schemes.md")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        let ids = cells[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect();
        let last = cells.last().unwrap();
        if let Some(at) = last.find("](schemes/") {
            let page = &last[at + 2..];
            rows.push((ids, page[..page.find(')').unwrap()].to_string()));
        }
    }
    rows
}

#[test]
fn every_scheme_has_its_page_named_by_its_id() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rows = index_rows(root);
    let ids: Vec<&str> = specbench::select::SCHEMES.iter().map(|e| e.id).collect();
    for id in &ids {
        let row = rows.iter().find(|(names, _)| names.iter().any(|n| n == id));
        let Some((_, page)) = row else {
            panic!("docs/schemes.md: the index has no row for `{id}`");
        };
        assert!(
            root.join("docs").join(page).exists(),
            "`{id}`: {page} does not exist"
        );
    }
    for page in markdown_in(&root.join("docs/schemes")) {
        let stem = page.file_stem().unwrap().to_str().unwrap().to_string();
        assert!(
            ids.contains(&stem.as_str()),
            "{}: a scheme's page is named by its registry id",
            page.display()
        );
    }
}
