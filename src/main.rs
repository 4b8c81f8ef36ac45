//! Parse the command line, hand it to [`specbench::cli::execute`], print the
//! error if there is one.

use std::process::ExitCode;

use clap::Parser;

use specbench::cli::{Cli, execute};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, which turns `specbench … | head` into a panic
    // in println!; the default action ends the process quietly instead.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at startup,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A bad flag or value is one line, like every other error: clap's
        // first line names the flag and the fix; its usage hint is dropped.
        Err(error) if error.use_stderr() => {
            let text = error.render().to_string();
            eprintln!("{}", text.lines().next().unwrap_or("error: bad arguments"));
            return ExitCode::from(2);
        }
        // --help and --version.
        Err(display) => display.exit(),
    };
    match execute(cli) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
