//! Compute devices and backends (`specula_device_*`, `specula_backend_check`).
use specula_sys as sys;

use crate::error::{ffi, Result};
use crate::options::Backend;

/// A GPU the library can run sessions on (`specula_device_info`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub backend: Backend,
    /// The value for [`SessionOptions::device`](crate::SessionOptions::device).
    pub index: i32,
    pub name: String,
    /// Bytes.
    pub total_memory: u64,
    /// Bytes free when queried.
    pub free_memory: u64,
    /// CUDA: major * 10 + minor, e.g. 90; 0 for other backends.
    pub compute_capability: i32,
    /// CUDA: streaming multiprocessors; Vulkan: compute units where the driver says (0 if unknown).
    pub multiprocessors: i32,
    /// Memory bandwidth in GB/s; 0 if unknown.
    pub peak_bandwidth_gbs: f64,
}

/// Number of usable devices of a GPU backend, [`Backend::Cuda`] or [`Backend::Vulkan`] (0 for the CPU and
/// [`Backend::Auto`], and when the library was built without it).
pub fn device_count(backend: Backend) -> usize {
    unsafe { sys::specula_device_count(backend.to_raw()) }.max(0) as usize
}

/// The usable devices of a GPU backend.
pub fn devices(backend: Backend) -> Result<Vec<DeviceInfo>> {
    let n = device_count(backend);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut c: sys::specula_device_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::specula_device_info>() as u32;
        ffi(|err| unsafe { sys::specula_device_get_info(backend.to_raw(), i as i32, &mut c, err) })?;
        // name is NUL-terminated within its 256 bytes; stop at the array's end regardless.
        let bytes: Vec<u8> = c.name.iter().take_while(|&&b| b != 0).map(|&b| b as u8).collect();
        out.push(DeviceInfo {
            backend,
            index: c.index,
            name: String::from_utf8_lossy(&bytes).into_owned(),
            total_memory: c.total_memory,
            free_memory: c.free_memory,
            compute_capability: c.compute_capability,
            multiprocessors: c.multiprocessors,
            peak_bandwidth_gbs: c.peak_bandwidth_gbs,
        });
    }
    Ok(out)
}

/// `Ok` when the backend has a usable device; otherwise `Unsupported` with the reason. The CPU is always `Ok`;
/// [`Backend::Auto`] is `Ok` when any GPU backend is, else its reason names each ("CUDA: ...; Vulkan: ...").
pub fn backend_check(backend: Backend) -> Result<()> {
    ffi(|err| unsafe { sys::specula_backend_check(backend.to_raw(), err) })
}
