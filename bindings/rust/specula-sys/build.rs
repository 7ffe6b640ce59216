//! Finds libspecula and tells rustc to link it (dynamically: `-l specula`).
//!
//! Where the library is looked for, first match wins:
//!   1. `SPECULA_LIB_DIR`: the directory holding libspecula.so;
//!   2. `SPECULA_PREFIX`: an install prefix, the library in `$SPECULA_PREFIX/lib` (or `lib64`);
//!   3. `pkg-config --libs-only-L specula` (honours `PKG_CONFIG_PATH`);
//!   4. nothing: the linker's default search path (/usr/lib, /usr/local/lib via ld.so.conf, ...).
//! At run time the dynamic loader must find libspecula.so.1 too: install it where ld.so looks, or set
//! `LD_LIBRARY_PATH` (run_tests.sh does), or add an rpath in the final binary's build.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &Path) -> bool {
    ["libspecula.so", "libspecula.dylib", "specula.lib", "libspecula.a"].iter().any(|name| dir.join(name).exists())
}

fn pkg_config_lib_dirs() -> Option<Vec<PathBuf>> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(pkg_config).args(["--libs-only-L", "specula"]).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    Some(
        text.split_whitespace()
            .filter_map(|flag| flag.strip_prefix("-L"))
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .collect(),
    )
}

fn main() {
    for var in ["SPECULA_LIB_DIR", "SPECULA_PREFIX", "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let mut lib_dir: Option<PathBuf> = None;
    let mut from_pkg_config = false;
    if let Some(dir) = env::var_os("SPECULA_LIB_DIR").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        if !has_library(&dir) {
            panic!("SPECULA_LIB_DIR={} holds no libspecula.so", dir.display());
        }
        lib_dir = Some(dir);
    } else if let Some(prefix) = env::var_os("SPECULA_PREFIX").filter(|v| !v.is_empty()) {
        let prefix = PathBuf::from(prefix);
        let found = ["lib", "lib64"].iter().map(|sub| prefix.join(sub)).find(|dir| has_library(dir));
        match found {
            Some(dir) => lib_dir = Some(dir),
            None => panic!(
                "SPECULA_PREFIX={} holds no lib/libspecula.so (install Specula there: cmake --install <build> --prefix {})",
                prefix.display(),
                prefix.display()
            ),
        }
    } else if let Some(dirs) = pkg_config_lib_dirs() {
        // Every -L it gives (usually one); the first that holds the library is published as lib_dir.
        for dir in &dirs {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        lib_dir = dirs.iter().find(|d| has_library(d)).or_else(|| dirs.first()).cloned();
        from_pkg_config = true;
    } else {
        println!(
            "cargo:warning=libspecula not located: set SPECULA_PREFIX or SPECULA_LIB_DIR, or make `pkg-config specula` work; \
             trying the linker's default search path"
        );
    }

    if let Some(dir) = &lib_dir {
        if !from_pkg_config {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        // Published to dependents' build scripts as DEP_SPECULA_LIB_DIR (package.links = "specula").
        println!("cargo:lib_dir={}", dir.display());
    }
    println!("cargo:rustc-link-lib=specula");
}
