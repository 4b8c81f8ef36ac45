//! docs/running.md's table of flags is made from the settings' one
//! definition (`experiment::settings`): a setting added, renamed or
//! reworded there fails here until the page shows it.

use specbench::experiment::settings::markdown_table;

#[test]
fn the_running_page_shows_every_setting_as_defined() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/running.md");
    let page = std::fs::read_to_string(path).unwrap();
    let header = "| flag | config field | what |";
    let start = page
        .find(header)
        .expect("docs/running.md has the table of flags");
    let table: String = page[start..]
        .lines()
        .take_while(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect();
    let expected = markdown_table();
    assert!(
        table == expected,
        "docs/running.md's table of flags is stale; replace it with:\n\n{expected}"
    );
}
