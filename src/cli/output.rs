//! The one way a command prints a result: pretty JSON with `--json`, else
//! its table.

use serde::Serialize;

/// Prints `value` as JSON when `json` is set, else the table `table` makes.
pub fn print_result(
    value: &impl Serialize,
    json: bool,
    table: impl FnOnce() -> String,
) -> Result<(), String> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", table());
    }
    Ok(())
}

/// An error from the library as the one line `main` prints.
pub fn line(error: anyhow::Error) -> String {
    format!("{error:#}")
}
