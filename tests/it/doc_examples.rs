//! docs/extending.md's worked examples are files the crate compiles: each
//! fenced ```rust block the doc names a new file for is that file's text,
//! and each block that shows a list (`figures!`, `tables!`, `schemes!`)
//! is today's list in the source plus the example's one line. An API change
//! breaks the example's build (or its unit test), and an edit to one side
//! alone breaks this test.

use std::path::Path;

/// Each worked example: the file the doc has a reader write, and the file
/// the crate compiles in its place (declared `#[cfg(test)]` with
/// `#[path = …]` beside the reader's, so its `super::` paths are the same,
/// and tested there as if its line were in the list).
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "src/select/toy_first.rs",
        "src/select/examples/toy_first.rs",
    ),
    (
        "src/report/plot/select_time.rs",
        "src/report/plot/examples/select_time.rs",
    ),
    (
        "src/report/tables/select_time.rs",
        "src/report/tables/examples/select_time.rs",
    ),
];

/// The lists the doc shows with an example's line added: the file that
/// holds the list, the macro, and the line the example adds.
const LISTS: &[(&str, &str, &str)] = &[
    ("src/select/mod.rs", "schemes!", "toy_first: ENTRY;"),
    (
        "src/report/plot/mod.rs",
        "figures!",
        "select_time: select_time_figures;",
    ),
    (
        "src/report/tables/mod.rs",
        "tables!",
        "select_time: SelectTime;",
    ),
];

/// A fenced code block of a page: its language, its text (each line with
/// its newline), and the last repository path cited before it, in the
/// prose since the previous block (`src/…` in backticks).
#[derive(Debug)]
struct Block {
    language: String,
    text: String,
    named: Option<String>,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut named: Option<String> = None;
    let mut open: Option<Block> = None;
    for line in page.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(language)) => {
                open = Some(Block {
                    language: language.trim().to_string(),
                    text: String::new(),
                    named: named.take(),
                });
            }
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some(block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {
                for (at, _) in line.match_indices("`src/") {
                    let path = &line[at + 1..];
                    if let Some(end) = path.find('`') {
                        named = Some(path[..end].to_string());
                    }
                }
            }
        }
    }
    assert!(open.is_none(), "a fence is not closed");
    blocks
}

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn extending() -> Vec<Block> {
    blocks(&read("docs/extending.md"))
}

/// The text of `name! { … }` in `source`, from its name to its closing
/// brace at the start of a line.
fn list_in(source: &str, name: &str) -> String {
    let start = source
        .find(&format!("\n{name} {{\n"))
        .unwrap_or_else(|| panic!("no `{name} {{` list"))
        + 1;
    let end = start + source[start..].find("\n}\n").expect("the list closes") + 3;
    source[start..end].to_string()
}

/// What the doc's block of `name!` must be: the source's list with the
/// example's line appended.
fn list_with(source: &str, name: &str, line: &str) -> String {
    let list = list_in(source, name);
    let body = list.strip_suffix("}\n").unwrap();
    format!("{body}    {line}\n}}\n")
}

#[test]
fn every_example_block_is_its_compiled_file() {
    let blocks = extending();
    for (written, compiled) in EXAMPLES {
        let named: Vec<&Block> = blocks
            .iter()
            .filter(|b| b.named.as_deref() == Some(*written))
            .collect();
        assert_eq!(
            named.len(),
            1,
            "docs/extending.md should show {written} in one block, just after naming it"
        );
        assert_eq!(named[0].language, "rust", "{written}");
        let file = read(compiled);
        assert!(
            named[0].text == file,
            "docs/extending.md's block for {written} is not {compiled}: change both together\n{}",
            first_difference(&named[0].text, &file)
        );
    }
}

#[test]
fn every_list_the_doc_shows_is_todays_list_plus_the_example() {
    let blocks = extending();
    for (file, name, line) in LISTS {
        let named: Vec<&Block> = blocks
            .iter()
            .filter(|b| b.named.as_deref() == Some(*file))
            .collect();
        assert_eq!(named.len(), 1, "docs/extending.md should show {file} once");
        let block = named[0];
        let source = read(file);
        if block.language == "diff" {
            // `schemes!` is long: the doc shows its last line as context and
            // the added line, with `...` for the rest.
            let list = list_in(&source, name);
            let last = list.lines().rev().nth(1).unwrap();
            let expected = format!(" {name} {{\n     ...\n {last}\n+    {line}\n }}\n");
            assert_eq!(block.text, expected, "{file}: the doc's `{name}` diff");
        } else {
            assert_eq!(block.language, "rust", "{file}");
            assert_eq!(
                block.text,
                list_with(&source, name, line),
                "{file}: the doc's `{name}` block is not today's list plus `{line}`"
            );
        }
    }
}

/// Every code block of docs/extending.md that names a file is checked by
/// one of the tests above: a new example cannot be left as text.
#[test]
fn every_named_block_of_the_doc_is_checked() {
    let checked: Vec<&str> = EXAMPLES
        .iter()
        .map(|(written, _)| *written)
        .chain(LISTS.iter().map(|(file, _, _)| *file))
        .collect();
    let blocks = extending();
    assert!(
        blocks.len() >= checked.len(),
        "docs/extending.md's blocks: {blocks:#?}"
    );
    for block in &blocks {
        if block.language == "rust" || block.language == "diff" {
            let named = block.named.as_deref().unwrap_or("(nothing)");
            assert!(
                checked.contains(&named),
                "a {} block after {named} is not compiled or checked: add it to EXAMPLES or LISTS",
                block.language
            );
        }
    }
}

/// Where two texts part, for the failure message.
fn first_difference(doc: &str, file: &str) -> String {
    let line = doc
        .lines()
        .zip(file.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| doc.lines().count().min(file.lines().count()));
    format!(
        "line {}:\n  doc:  {:?}\n  file: {:?}",
        line + 1,
        doc.lines().nth(line),
        file.lines().nth(line)
    )
}

#[test]
fn the_block_reader_names_blocks_by_the_path_before_them() {
    let page = "Write `src/a.rs` (not `src/b.rs`), then `src/c.rs`:\n\n```rust\nfn c() {}\n```\n\nno path\n\n```text\nx\n```\n";
    let found = blocks(page);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].named.as_deref(), Some("src/c.rs"));
    assert_eq!(
        (found[0].language.as_str(), found[0].text.as_str()),
        ("rust", "fn c() {}\n")
    );
    assert_eq!(found[1].named, None);
}
