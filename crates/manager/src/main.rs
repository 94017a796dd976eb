//! The `manager` binary: parses the command line and hands over to [`manager::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    manager::cli::main()
}
