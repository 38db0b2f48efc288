//! Link options of olmv1's binaries.

fn main() {
    // Packed relative relocations (DT_RELR): the position-independent binary's ~35,000 relative
    // relocations take a few KB instead of 856 KB, which the loader reads at every start and
    // which then stay resident (docs/benchmarks.md, "The release build's size"). glibc 2.36 and
    // later load them, and the image carries the libc of the machine that built the binary; GNU
    // ld before 2.38 ignores the option with a warning, and ld leaves the relocations unpacked
    // when the C library it links cannot load them.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu")
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
