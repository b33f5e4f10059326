//! The `railscope` binary: see the library crate for everything it does.

use std::process::ExitCode;

fn main() -> ExitCode {
    match railscope::run(std::env::args_os()) {
        Ok(railscope::Outcome::Exit(code)) => ExitCode::from(code),
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            let code = err.exit_code();
            eprintln!("railscope: {:#}", anyhow::Error::from(err));
            ExitCode::from(code)
        }
    }
}
