//! Compiles the run layer's Vulkan shaders in shaders/*.wgsl to SPIR-V in
//! OUT_DIR with naga (pure Rust: no CMake, Python or glslc needed to build
//! vkcuda). It is the build script of `crates/run` (the core has no shaders).

use std::error::Error;
use std::path::Path;

fn main() -> Result<(), Box<dyn Error>> {
    let out = std::env::var("OUT_DIR")?;
    // The shaders sit at the repository's top, two folders above crates/run.
    let shaders = Path::new(&std::env::var("CARGO_MANIFEST_DIR")?).join("../../shaders");
    println!("cargo:rerun-if-changed={}", shaders.display());
    for entry in std::fs::read_dir(&shaders)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "wgsl") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let source = with_includes(&shaders, &std::fs::read_to_string(&path)?)?;
        let name = path.display();
        let module = naga::front::wgsl::parse_str(&source)
            .map_err(|e| format!("{name}: {}", e.emit_to_string(&source)))?;
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            // Unpacking half floats (RGBA16F buffers) is GLSL.std.450's UnpackHalf2x16: core SPIR-V.
            naga::valid::Capabilities::IMMEDIATES | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        )
        .validate(&module)
        .map_err(|e| format!("{name}: {}", e.emit_to_string(&source)))?;
        let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
        let words = naga::back::spv::write_vec(&module, &info, &options, None)?;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let stem = path.file_stem().ok_or("shader without a name")?;
        std::fs::write(Path::new(&out).join(stem).with_extension("spv"), bytes)?;
    }
    Ok(())
}

/// `source` with each line `// #include NAME` replaced by the file NAME beside it.
fn with_includes(dir: &Path, source: &str) -> Result<String, Box<dyn Error>> {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        match line.strip_prefix("// #include ") {
            Some(name) => {
                let included = dir.join(name.trim());
                println!("cargo:rerun-if-changed={}", included.display());
                out += &std::fs::read_to_string(&included)
                    .map_err(|e| format!("{}: {e}", included.display()))?;
            }
            None => out += line,
        }
        out.push('\n');
    }
    Ok(out)
}
