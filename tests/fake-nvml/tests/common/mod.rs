//! Shared set-up: a private copy of the fake library driven by a private fixture file.
//!
//! `dlopen` of one path gives one loaded copy with one state, and the library has no
//! `SONAME`, so each [`Fake`] copies `libnvidia_ml_fake.so` into its own temporary
//! directory: tests running in parallel never share state. The copy is pointed at its
//! fixture with the library's own `railscopeFakeNvmlSetFixture`, not with the
//! process-wide `RAILSCOPE_FAKE_NVML`.

#![allow(dead_code, unsafe_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nvidia_ml_fake::fixture::Fixture;
use nvml_wrapper::Nvml;

/// One private copy of the library and its fixture file.
pub struct Fake {
    /// The copied `.so`.
    pub lib_path: PathBuf,
    /// The fixture file the copy reads (replace it with [`Fake::replace`]).
    pub fixture_path: PathBuf,
    /// Keeps the copy loaded (and the set-fixture call's target alive).
    _control: libloading::Library,
    _dir: tempfile::TempDir,
}

/// A fixture shipped in `tests/fake-nvml/fixtures/`.
pub fn shipped(name: &str) -> Fixture {
    Fixture::load(&nvidia_ml_fake::fixtures_dir().join(name)).expect("shipped fixture loads")
}

impl Fake {
    /// A copy of the library reading a copy of `fixture`.
    pub fn new(fixture: &Fixture) -> Self {
        let lib = nvidia_ml_fake::library_path().expect("find or build the fake library");
        let dir = tempfile::tempdir().expect("temp dir");
        let lib_path = dir.path().join(nvidia_ml_fake::LIBRARY_FILE_NAME);
        std::fs::copy(&lib, &lib_path).expect("copy the library");
        let fixture_path = dir.path().join("fixture.json");
        fixture.save(&fixture_path).expect("write fixture");
        // SAFETY: loading our own test library; its initialisers only set up Rust statics.
        let control = unsafe { libloading::Library::new(&lib_path) }.expect("dlopen the copy");
        let path = CString::new(fixture_path.as_os_str().as_bytes()).expect("no NUL in path");
        // SAFETY: the symbol has this exact signature (src/exports.rs).
        unsafe {
            let set: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u32> =
                control
                    .get(b"railscopeFakeNvmlSetFixture\0")
                    .expect("control symbol");
            assert_eq!(set(path.as_ptr()), 0);
        }
        Self {
            lib_path,
            fixture_path,
            _control: control,
            _dir: dir,
        }
    }

    /// A copy of the library reading a shipped fixture.
    pub fn shipped(name: &str) -> Self {
        Self::new(&shipped(name))
    }

    /// nvml-wrapper initialised over this copy.
    pub fn nvml(&self) -> Nvml {
        Nvml::builder()
            .lib_path(self.lib_path.as_os_str())
            .init()
            .expect("nvml-wrapper initialises over the fake")
    }

    /// Replaces the fixture file (atomically); the library re-reads it on its next call.
    pub fn replace(&self, fixture: &Fixture) {
        fixture.save(&self.fixture_path).expect("rewrite fixture");
    }
}

/// One raw field answer: (nvmlReturn, valueType, value as u64 for the integer types,
/// `u64::MAX` otherwise).
pub type RawField = (u32, u32, u64);

/// `nvmlDeviceGetFieldValues` with explicit `scopeId`s, through the wrapper's library
/// handle (the safe `field_values_for` always sends scope 0): the call's return code and
/// each entry's answer.
pub fn raw_fields(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    request: &[(u32, u32)],
) -> (u32, Vec<RawField>) {
    use nvml_wrapper_sys::bindings::nvmlFieldValue_t;
    let mut values: Vec<nvmlFieldValue_t> = request
        .iter()
        .map(|&(id, scope)| {
            // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v.scopeId = scope;
            v
        })
        .collect();
    // SAFETY: `values` holds `len` initialised entries; the handle comes from this Nvml.
    let rc = unsafe {
        nvml.lib().nvmlDeviceGetFieldValues(
            device.handle(),
            values.len() as i32,
            values.as_mut_ptr(),
        )
    };
    let out = values
        .iter()
        .map(|v| {
            // SAFETY: the union member read is the one `valueType` names.
            let x = unsafe {
                match v.valueType {
                    1 => u64::from(v.value.uiVal),
                    2 => v.value.ulVal,
                    3 => v.value.ullVal,
                    _ => u64::MAX,
                }
            };
            (v.nvmlReturn, v.valueType, x)
        })
        .collect();
    (rc, out)
}
