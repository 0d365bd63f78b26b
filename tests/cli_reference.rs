//! `docs/reference/cli.md` is what `sanddune::cli::reference_markdown()`
//! renders from the clap definitions: a flag added, renamed or re-described
//! in `host/src/cli/` without regenerating the page fails here.
//!
//! Regenerate: `SANDDUNE_BLESS=1 cargo test --test cli_reference`.

use std::path::Path;

const REGENERATE: &str = "SANDDUNE_BLESS=1 cargo test --test cli_reference";

#[test]
fn the_cli_reference_matches_the_clap_definitions() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/cli.md");
    let rendered = sanddune::cli::reference_markdown();
    if std::env::var("SANDDUNE_BLESS").is_ok_and(|v| !v.is_empty() && v != "0") {
        std::fs::create_dir_all(page.parent().unwrap()).unwrap();
        std::fs::write(&page, &rendered).unwrap();
        eprintln!("wrote {}", page.display());
        return;
    }
    let current = std::fs::read_to_string(&page).unwrap_or_else(|e| {
        panic!("docs/reference/cli.md cannot be read ({e}); generate it with `{REGENERATE}`")
    });
    if current == rendered {
        return;
    }
    let first_difference = current
        .lines()
        .zip(rendered.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("line {}:\n  page:     {a}\n  rendered: {b}", i + 1))
        .unwrap_or_else(|| {
            format!(
                "the page has {} lines, the rendering {}",
                current.lines().count(),
                rendered.lines().count()
            )
        });
    panic!(
        "docs/reference/cli.md is out of date with the CLI's clap definitions \
         (host/src/cli/); regenerate it with `{REGENERATE}`.\nFirst difference at {first_difference}"
    );
}
