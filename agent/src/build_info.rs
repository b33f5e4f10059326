//! Version and source revision, fixed at build time.

/// The crate version.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git revision the binary was built from (`RAILSCOPE_REVISION` or `git rev-parse`),
/// `unknown` outside a git checkout.
pub(crate) const REVISION: &str = env!("RAILSCOPE_REVISION");
