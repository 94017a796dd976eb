//! `cargo run -p xtask -- <task>`: developer tasks. Tasks: `generate`.

use anyhow::bail;

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        "generate" => {
            for path in xtask::generate(&xtask::workspace_root())? {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        other => bail!("unknown task {other:?}; tasks: generate"),
    }
}
