//! Active and maximum MTU of every port through libibverbs (`ibv_query_port`), loaded at run
//! time. Neither sysfs nor RDMA netlink shows the MTU; `ibv_devinfo` gets it the same way.
//! An absent library means no verbs data, not an error.
//!
//! This is one of the few modules allowed `unsafe`: it calls C functions through pointers
//! resolved with `dlsym`.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;

use libloading::Library;

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CloseDevice = unsafe extern "C" fn(*mut c_void) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut c_void, u8, *mut c_void) -> c_int;

/// The MTUs of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMtu {
    /// `active_mtu` in bytes.
    pub active: u32,
    /// `max_mtu` in bytes.
    pub max: u32,
}

/// `enum ibv_mtu` (1 = 256 ... 5 = 4096) in bytes.
pub fn mtu_bytes(value: i32) -> Option<u32> {
    match value {
        1..=5 => Some(128u32 << value),
        _ => None,
    }
}

/// libibverbs, loaded.
#[derive(Debug)]
pub struct Verbs {
    _lib: Library,
    get_device_list: GetDeviceList,
    free_device_list: FreeDeviceList,
    get_device_name: GetDeviceName,
    open_device: OpenDevice,
    close_device: CloseDevice,
    query_port: QueryPort,
}

/// Bytes reserved for `struct ibv_port_attr`: the compat layout the exported
/// `ibv_query_port` fills is 48 bytes; leave room for any growth.
const PORT_ATTR_BYTES: usize = 256;

impl Verbs {
    /// Loads `library` (`libibverbs.so.1`); `None` when it is not installed.
    pub fn load(library: &str) -> Option<Verbs> {
        // SAFETY: loading libibverbs runs its constructors, which only register providers;
        // it is the library every RDMA tool links.
        let lib = unsafe { Library::new(library) }.ok()?;
        // SAFETY: the symbol types match the prototypes in <infiniband/verbs.h>.
        unsafe {
            let get_device_list = *lib.get::<GetDeviceList>(b"ibv_get_device_list\0").ok()?;
            let free_device_list = *lib.get::<FreeDeviceList>(b"ibv_free_device_list\0").ok()?;
            let get_device_name = *lib.get::<GetDeviceName>(b"ibv_get_device_name\0").ok()?;
            let open_device = *lib.get::<OpenDevice>(b"ibv_open_device\0").ok()?;
            let close_device = *lib.get::<CloseDevice>(b"ibv_close_device\0").ok()?;
            let query_port = *lib.get::<QueryPort>(b"ibv_query_port\0").ok()?;
            Some(Verbs {
                _lib: lib,
                get_device_list,
                free_device_list,
                get_device_name,
                open_device,
                close_device,
                query_port,
            })
        }
    }

    /// Queries the given ports of every device `wanted` accepts.
    pub fn port_mtus(
        &self,
        ports: &HashMap<String, Vec<u32>>,
    ) -> io::Result<HashMap<(String, u32), PortMtu>> {
        let mut out = HashMap::new();
        let mut count: c_int = 0;
        // SAFETY: `count` is a valid out-pointer; the list is freed below.
        let list = unsafe { (self.get_device_list)(&mut count) };
        if list.is_null() {
            return Err(io::Error::last_os_error());
        }
        for i in 0..usize::try_from(count).unwrap_or(0) {
            // SAFETY: the list holds `count` device pointers.
            let device = unsafe { *list.add(i) };
            // SAFETY: a device from the list has a NUL-terminated name owned by the library.
            let name_ptr = unsafe { (self.get_device_name)(device) };
            if name_ptr.is_null() {
                continue;
            }
            // SAFETY: checked non-null above; valid until the list is freed.
            let name = unsafe { CStr::from_ptr(name_ptr) }
                .to_string_lossy()
                .into_owned();
            let Some(numbers) = ports.get(&name) else {
                continue;
            };
            // SAFETY: `device` comes from the current list.
            let context = unsafe { (self.open_device)(device) };
            if context.is_null() {
                continue; // no access to /dev/infiniband/uverbsN: no verbs data for it
            }
            for &port in numbers {
                let Ok(port_u8) = u8::try_from(port) else {
                    continue;
                };
                let mut attr = [0u8; PORT_ATTR_BYTES];
                // SAFETY: `context` is open; `attr` is larger than struct ibv_port_attr.
                let rc = unsafe { (self.query_port)(context, port_u8, attr.as_mut_ptr().cast()) };
                if rc != 0 {
                    continue;
                }
                // struct ibv_port_attr: state, max_mtu, active_mtu are its first three ints.
                let int_at = |off: usize| {
                    i32::from_ne_bytes([attr[off], attr[off + 1], attr[off + 2], attr[off + 3]])
                };
                if let (Some(max), Some(active)) = (mtu_bytes(int_at(4)), mtu_bytes(int_at(8))) {
                    out.insert((name.clone(), port), PortMtu { active, max });
                }
            }
            // SAFETY: closing the context opened above, once.
            unsafe { (self.close_device)(context) };
        }
        // SAFETY: freeing the list returned by ibv_get_device_list, once.
        unsafe { (self.free_device_list)(list) };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_enum() {
        assert_eq!(
            [1, 2, 3, 4, 5].map(mtu_bytes),
            [Some(256), Some(512), Some(1024), Some(2048), Some(4096)]
        );
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }

    #[test]
    fn a_missing_library_is_no_data() {
        assert!(Verbs::load("libibverbs-that-does-not-exist.so.1").is_none());
    }

    #[test]
    fn the_installed_library_answers_without_devices() {
        // The real library (scripts/test installs it where it is missing), on a node without
        // RDMA devices: an empty answer or an errno, never a crash.
        let Some(verbs) = Verbs::load("libibverbs.so.1") else {
            panic!("libibverbs.so.1 is not installed: install the Debian package libibverbs1");
        };
        match verbs.port_mtus(&HashMap::from([("mlx5_0".to_owned(), vec![1])])) {
            Ok(map) => assert!(map.is_empty()),
            Err(err) => assert!(err.raw_os_error().is_some()),
        }
    }
}
