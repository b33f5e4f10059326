//! The `railscope` binary: see the library crate for everything it does.

use std::process::ExitCode;

fn main() -> ExitCode {
    match railscope::run(std::env::args_os()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("railscope: {:#}", anyhow::Error::from(err));
            ExitCode::FAILURE
        }
    }
}
