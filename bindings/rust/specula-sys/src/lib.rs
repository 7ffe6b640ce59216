//! Raw declarations of libspecula's C ABI, `specula.h`, as Debian's bindgen generates them
//! (`generate.sh`; the generated file `bindings.rs` is committed so that building needs no bindgen).
//!
//! Everything here is `unsafe` and follows the header's rules: options structs are filled by their
//! `*_init` function, errors come back through `specula_error **`, handles are freed with their `*_destroy`.
//! The safe API is the `specula` crate.
//!
//! Enums are plain integer constants (`specula_status_SPECULA_ERR_IO`), as bindgen's `consts` style makes
//! them: a value the library adds in a later minor version is then just another integer, never undefined
//! behaviour. The anonymous enum of tokenizer flags is `_bindgen_ty_1` (`SPECULA_TOKENIZE_*`).
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, clippy::all)]

include!("bindings.rs");

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::path::PathBuf;
    use std::process::Command;

    /// The library we linked and loaded has the ABI this file was generated from.
    #[test]
    fn abi_version_matches_header() {
        let abi = unsafe { specula_abi_version() };
        assert_eq!(abi, SPECULA_ABI_VERSION, "libspecula's ABI version differs from specula.h's");
        let v = unsafe { specula_version() };
        assert_eq!(v >> 16, SPECULA_VERSION_MAJOR);
        // The library must be at least as new as the header: options structs only grow.
        assert!(
            v >= (SPECULA_VERSION_MAJOR << 16) | (SPECULA_VERSION_MINOR << 8),
            "libspecula {:#x} is older than the header (0.{})",
            v,
            SPECULA_VERSION_MINOR
        );
        let s = unsafe { CStr::from_ptr(specula_version_string()) }.to_str().unwrap();
        assert_eq!(s, format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff));
    }

    #[test]
    fn init_functions_set_struct_size() {
        unsafe {
            let mut o: specula_session_options = std::mem::zeroed();
            specula_session_options_init_sized(&mut o, std::mem::size_of_val(&o));
            assert_eq!(o.struct_size as usize, std::mem::size_of::<specula_session_options>());
            let mut g: specula_generate_options = std::mem::zeroed();
            specula_generate_options_init_sized(&mut g, std::mem::size_of_val(&g));
            assert_eq!(g.struct_size as usize, std::mem::size_of::<specula_generate_options>());
            let mut s: specula_speculative_options = std::mem::zeroed();
            specula_speculative_options_init_sized(&mut s, std::mem::size_of_val(&s));
            assert_eq!(s.struct_size as usize, std::mem::size_of::<specula_speculative_options>());
            // The functions applications built against older headers call write no more than their struct.
            let mut legacy: specula_sampler_options = std::mem::zeroed();
            specula_sampler_options_init(&mut legacy);
            assert!(legacy.struct_size as usize <= std::mem::size_of::<specula_sampler_options>());
            assert!(legacy.struct_size >= 4);
        }
    }

    #[test]
    fn status_strings() {
        let name = unsafe { CStr::from_ptr(specula_status_string(specula_status_SPECULA_ERR_FORMAT)) };
        assert_eq!(name.to_str().unwrap(), "SPECULA_ERR_FORMAT");
        let err: *const specula_error = std::ptr::null();
        assert_eq!(unsafe { specula_error_status(err) }, specula_status_SPECULA_OK);
        unsafe { specula_error_destroy(std::ptr::null_mut()) };
    }

    /// bindings.rs is what `generate.sh` (Debian's bindgen 0.60.1, fixed flags) makes of the repository's
    /// specula.h. Skipped, with a message, where bindgen or the header is missing.
    #[test]
    fn bindings_match_header() {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let header = manifest.join("../../../sdk/include/specula/specula.h");
        if !header.exists() {
            println!("SKIPPED: {} not found (not in the Specula repository)", header.display());
            return;
        }
        let out = Command::new("bash")
            .arg(manifest.join("generate.sh"))
            .arg("--check")
            .output()
            .expect("cannot run bash generate.sh --check");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => println!("{}", stdout.trim()),
            Some(77) => println!("{}", stdout.trim()),
            _ => panic!("generate.sh --check failed:\n{}{}", stdout, stderr),
        }
    }
}
