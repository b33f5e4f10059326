//! The `railscope` binary: see the library crate for everything it does.

use std::process::ExitCode;

fn main() -> ExitCode {
    match railscope::run(std::env::args_os()) {
        Ok(railscope::Outcome::Exit(code)) => ExitCode::from(code),
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("railscope: {:#}", anyhow::Error::from(err));
            // doctor's 1 and 2 are verdicts: a doctor that could not run says 3.
            if std::env::args_os().nth(1).is_some_and(|a| a == "doctor") {
                ExitCode::from(3)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
