//! The real file system: one `open`, `read` and `close` per read, nothing remembered. The layers
//! above ([`crate::fs::kept`]) use it for what they do not keep.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::fs::{DirEntry, Fs, MAX_ATTRIBUTE_BYTES, natural_cmp};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl Fs for RealFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = File::open(path)?;
        let mut buf = Vec::with_capacity(64);
        file.take(MAX_ATTRIBUTE_BYTES + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > MAX_ATTRIBUTE_BYTES {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        Ok(buf)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // the kernel names its attributes in ASCII
            };
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            entries.push(DirEntry { name, is_dir });
        }
        entries.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        Ok(entries)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_file_is_refused_with_efbig() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge");
        std::fs::write(&path, vec![b'1'; (MAX_ATTRIBUTE_BYTES + 10) as usize]).unwrap();
        let err = RealFs.read(&path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
        std::fs::write(&path, b"4: ACTIVE\n").unwrap();
        assert_eq!(RealFs.read(&path).unwrap(), b"4: ACTIVE\n");
    }
}
