//! PEM files: certificates and private keys, for the web config's server TLS, OTLP's client
//! TLS and `doctor --from`'s. One reader, so that every TLS setting accepts what the others do
//! (any key type rustls knows; certificates in order, extra PEM sections skipped).

use std::path::Path;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate in the PEM file at `path` (possibly none).
pub(crate) fn certificates_in_file(
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, pem::Error> {
    CertificateDer::pem_file_iter(path).and_then(|it| it.collect())
}

/// Every certificate in PEM text already read (possibly none).
pub(crate) fn certificates_in(text: &[u8]) -> Result<Vec<CertificateDer<'static>>, pem::Error> {
    CertificateDer::pem_slice_iter(text).collect()
}

/// The first private key in the PEM file at `path`.
pub(crate) fn key_in_file(path: &Path) -> Result<PrivateKeyDer<'static>, pem::Error> {
    PrivateKeyDer::from_pem_file(path)
}

/// The first private key in PEM text already read.
pub(crate) fn key_in(text: &[u8]) -> Result<PrivateKeyDer<'static>, pem::Error> {
    PrivateKeyDer::from_pem_slice(text)
}
